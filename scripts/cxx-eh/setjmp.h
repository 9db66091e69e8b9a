/* setjmp.h for wasm32-wasi code compiled with -mllvm -enable-emscripten-sjlj
 * (scripts/build-cxx-eh.sh installs it ahead of wasi-libc's, which refuses
 * to be included without the exception-handling proposal). The pass
 * rewrites every call of setjmp and longjmp, so they are declared only;
 * scripts/cxx-eh/sjlj_runtime.c holds what they become. jmp_buf has
 * wasi-libc's size. */
#ifndef _SETJMP_H
#define _SETJMP_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct __jmp_buf_tag {
	unsigned long __jb[8];
	unsigned long __fl;
	unsigned long __ss[128 / sizeof(long)];
} jmp_buf[1];

typedef jmp_buf sigjmp_buf;

int setjmp(jmp_buf) __attribute__((__returns_twice__));
_Noreturn void longjmp(jmp_buf, int);

/* The pass knows setjmp by name only: the other spellings are it, and a
 * signal mask (which WASI has none of) is not saved. */
#define setjmp setjmp
#define _setjmp setjmp
#define sigsetjmp(env, savemask) setjmp(env)
#define _longjmp longjmp
#define siglongjmp longjmp

#ifdef __cplusplus
}
#endif

#endif
