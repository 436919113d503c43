#include <cuda.h>
#include <stddef.h>
#define L(x) (long long)(x),
const long long gem_layout_real[] = {
#include "layout_list.h"
};
