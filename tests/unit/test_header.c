/* The public header must compile on its own. */
#include "memest/memest.h"

int main(void)
{
    return memest_version()[0] ? 0 : 1;
}
