#include "gemini/cuda_subset.h"
#include <stddef.h>
#define L(x) (long long)(x),
const long long gem_layout_subset[] = {
#include "layout_list.h"
};
