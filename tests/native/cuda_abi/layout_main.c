#include <stdio.h>
extern const long long gem_layout_subset[], gem_layout_real[];
#define L(x) #x,
static const char *const names[] = {
#include "layout_list.h"
};
int main(void)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (gem_layout_subset[i] != gem_layout_real[i]) {
            printf("%s: subset %lld, cuda.h %lld\n", names[i], gem_layout_subset[i], gem_layout_real[i]);
            bad = 1;
        }
    printf("%zu checks\n", sizeof(names) / sizeof(names[0]));
    return bad;
}
