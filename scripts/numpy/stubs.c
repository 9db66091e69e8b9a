/* C++ exceptions for numpy's C++ code (pocketfft) in python.wasm.
 * Debian's libc++abi for WASI is built without exceptions, and wasm32-wasi
 * here has no unwinding: a throw cannot be caught. It ends the run as a
 * crash (a trap the host reports), with a line on stderr saying why. */
#include <stdio.h>
#include <stdlib.h>

void *__cxa_allocate_exception(unsigned long size) {
    (void)size;
    fputs("airlock: C++ exception thrown in numpy (no unwinding on wasm32-wasi)\n", stderr);
    abort();
}

void __cxa_throw(void *obj, void *tinfo, void (*dest)(void *)) {
    (void)obj; (void)tinfo; (void)dest;
    abort();
}
