/* Airlock's threads for CPython on WASI: this file stands in for CPython's
 * Python/thread_pthread_stubs.h (whose pthread_create fails) when
 * scripts/threads/build-threads.sh compiles Python/thread.c again. The
 * API and its types are the stubs' (Include/cpython/pthread_stubs.h): the
 * rest of CPython was compiled against them and is linked unchanged.
 *
 * The threads are green: every thread of a run executes in the one
 * instance, one at a time, each on its own goroutine in the host, and the
 * host hands the instance from one to the next only inside the calls of
 * the "airlock_threads" import module (RATIONALE, "Threads"). Between
 * two such calls a thread's memory operations cannot interleave with
 * another's, so the locks below are plain loads and stores around a
 * futex-like wait and wake. The host saves and restores, per thread, the
 * shadow stack pointer and the words registered at spawn (errno,
 * CPython's current thread state, the thread's descriptor): the C
 * libraries were built without threads, so their thread-local variables
 * are ordinary globals.
 *
 * An engine without threads (wasmtime) answers spawn with EAGAIN, and
 * CPython raises its usual "can't start new thread".
 */
#include "cpython/pthread_stubs.h"
#include "pycore_ceval.h"    // _Py_set_eval_breaker_bit
#include "pycore_pystate.h"   // _Py_tss_tstate

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define AIRLOCK_THREADS_IMPORT(name) \
    __attribute__((import_module("airlock_threads"), import_name(name)))

// spawn starts a thread running airlock_thread_entry(thread) on the stack
// ending at stack_top; the host writes THREAD_GONE at gone when it has
// left that stack for good; words lists the addresses of the thread-local
// words (n of them). 0, or an errno value.
AIRLOCK_THREADS_IMPORT("spawn")
int32_t airlock_threads_spawn(uint32_t thread, volatile int32_t *gone, uint32_t stack_top, uint32_t words, int32_t n);
// wait blocks while *addr == expected, until woken or timeout_ns passes
// (negative: no timeout). 1 when it timed out, else 0.
AIRLOCK_THREADS_IMPORT("wait")
int32_t airlock_threads_wait(volatile int32_t *addr, int32_t expected, int64_t timeout_ns);
// wake makes up to count threads waiting on addr runnable.
AIRLOCK_THREADS_IMPORT("wake")
int32_t airlock_threads_wake(volatile int32_t *addr, int32_t count);
// exit ends the calling thread (never the main one) without returning.
AIRLOCK_THREADS_IMPORT("exit")
void airlock_threads_exit(void) __attribute__((__noreturn__));

// The default stack of a thread CPython starts without a size: CPython
// caps C recursion on WASI at 500 levels (Py_C_RECURSION_LIMIT), which the
// main thread's 8 MiB carries with room to spare; 2 MiB carries it too.
#define AIRLOCK_THREAD_STACK (2u << 20)
#define AIRLOCK_THREAD_STACK_MIN (64u << 10)

enum { THREAD_RUNNING = 0, THREAD_GONE = 2 };

struct airlock_thread {
    void *(*start)(void *);
    void *arg;
    void *result;
    char *stack;
    // state: THREAD_RUNNING until the host has left the thread's stack
    // for good, then THREAD_GONE (written by the host, which wakes its
    // joiners).
    volatile int32_t state;
    int32_t detached;
    struct airlock_thread *next;  // in airlock_threads until freed
    void *keys[PTHREAD_KEYS_MAX];
};

static struct airlock_thread airlock_main_thread;
// The running thread's descriptor; NULL on the main thread. A
// thread-local word: the host swaps it.
static struct airlock_thread *airlock_self;
// The threads whose descriptors are not freed yet: a stack goes once its
// thread is GONE (joined or not: a program that keeps its Thread objects
// and never joins would otherwise keep every stack), a descriptor when
// it is joined, or GONE and detached.
static struct airlock_thread *airlock_threads;

static struct airlock_thread *
current(void)
{
    return airlock_self ? airlock_self : &airlock_main_thread;
}

// The thread's entry, called by the host on the thread's own goroutine
// with the shadow stack pointer at the top of the thread's stack.
__attribute__((export_name("airlock_thread_entry"))) void
airlock_thread_entry(struct airlock_thread *t)
{
    airlock_self = t;
    t->result = t->start(t->arg);
}

// The host's switch request (the loop-budget call, when another thread
// has waited a switch interval): what a GIL waiter's timed-out wait does
// in CPython, on behalf of a thread that cannot run until this one
// blocks.
__attribute__((export_name("airlock_threads_preempt"))) void
airlock_threads_preempt(void)
{
    PyThreadState *tstate = _Py_tss_tstate;
    if (tstate != NULL) {
        _Py_set_eval_breaker_bit(tstate, _PY_GIL_DROP_REQUEST_BIT);
    }
}

static void
unlink_thread(struct airlock_thread *t)
{
    for (struct airlock_thread **p = &airlock_threads; *p; p = &(*p)->next) {
        if (*p == t) {
            *p = t->next;
            return;
        }
    }
}

static void
free_thread(struct airlock_thread *t)
{
    unlink_thread(t);
    free(t->stack);
    free(t);
}

static void
sweep_threads(void)
{
    struct airlock_thread **p = &airlock_threads;
    while (*p) {
        struct airlock_thread *t = *p;
        if (t->state == THREAD_GONE) {
            free(t->stack);
            t->stack = NULL;
            if (t->detached) {
                *p = t->next;
                free(t);
                continue;
            }
        }
        p = &t->next;
    }
}

// mutex: word 0 is 0 unlocked, 1 locked, 2 locked with waiters.
static volatile int32_t *
mutex_word(pthread_mutex_t *m)
{
    return (volatile int32_t *)&m->__u.__vi[0];
}

int
pthread_mutex_init(pthread_mutex_t *restrict mutex,
                   const pthread_mutexattr_t *restrict attr)
{
    memset(mutex, 0, sizeof(*mutex));
    return 0;
}

int
pthread_mutex_destroy(pthread_mutex_t *mutex)
{
    return *mutex_word(mutex) ? EBUSY : 0;
}

int
pthread_mutex_trylock(pthread_mutex_t *mutex)
{
    volatile int32_t *w = mutex_word(mutex);
    if (*w) {
        return EBUSY;
    }
    *w = 1;
    return 0;
}

int
pthread_mutex_lock(pthread_mutex_t *mutex)
{
    volatile int32_t *w = mutex_word(mutex);
    if (*w == 0) {
        *w = 1;
        return 0;
    }
    do {
        *w = 2;
        airlock_threads_wait(w, 2, -1);
    } while (*w != 0);
    *w = 2;  // others may still wait: the unlock must wake one
    return 0;
}

int
pthread_mutex_unlock(pthread_mutex_t *mutex)
{
    volatile int32_t *w = mutex_word(mutex);
    int32_t was = *w;
    *w = 0;
    if (was == 2) {
        airlock_threads_wake(w, 1);
    }
    return 0;
}

// condition: word 0 counts signals, word 2 the threads waiting; the
// clock of timed waits is kept in word 1 (CPython asks for
// CLOCK_MONOTONIC where it can). A signal with nobody waiting calls no
// host: the GIL's release signals a condition every time, with a waiter
// only when threads run.
static volatile int32_t *
cond_word(pthread_cond_t *c)
{
    return (volatile int32_t *)&c->__u.__vi[0];
}

static volatile int32_t *
cond_waiters(pthread_cond_t *c)
{
    return (volatile int32_t *)&c->__u.__vi[2];
}

int
pthread_cond_init(pthread_cond_t *restrict cond,
                  const pthread_condattr_t *restrict attr)
{
    memset(cond, 0, sizeof(*cond));
    cond->__u.__p[1] = attr && attr->__attr ? (void *)(uintptr_t)attr->__attr : (void *)CLOCK_REALTIME;
    return 0;
}

PyAPI_FUNC(int) pthread_cond_destroy(pthread_cond_t *cond)
{
    return 0;
}

static int
cond_wait(pthread_cond_t *cond, pthread_mutex_t *mutex, int64_t timeout_ns)
{
    volatile int32_t *w = cond_word(cond);
    int32_t seen = *w;
    *cond_waiters(cond) += 1;
    pthread_mutex_unlock(mutex);
    int timed_out = airlock_threads_wait(w, seen, timeout_ns);
    pthread_mutex_lock(mutex);
    *cond_waiters(cond) -= 1;
    return timed_out ? ETIMEDOUT : 0;
}

int
pthread_cond_wait(pthread_cond_t *restrict cond,
                  pthread_mutex_t *restrict mutex)
{
    return cond_wait(cond, mutex, -1);
}

int
pthread_cond_timedwait(pthread_cond_t *restrict cond,
                       pthread_mutex_t *restrict mutex,
                       const struct timespec *restrict abstime)
{
    clockid_t clock = cond->__u.__p[1] ? (clockid_t)cond->__u.__p[1] : CLOCK_REALTIME;
    struct timespec now;
    if (clock_gettime(clock, &now) != 0) {
        return errno;
    }
    int64_t ns = (int64_t)(abstime->tv_sec - now.tv_sec) * 1000000000 + (abstime->tv_nsec - now.tv_nsec);
    return cond_wait(cond, mutex, ns > 0 ? ns : 0);
}

static int
cond_wake(pthread_cond_t *cond, int32_t count)
{
    volatile int32_t *w = cond_word(cond);
    *w += 1;
    if (*cond_waiters(cond) > 0) {
        airlock_threads_wake(w, count);
    }
    return 0;
}

int
pthread_cond_signal(pthread_cond_t *cond)
{
    return cond_wake(cond, 1);
}

int
pthread_cond_broadcast(pthread_cond_t *cond)
{
    return cond_wake(cond, INT32_MAX);
}

int
pthread_condattr_init(pthread_condattr_t *attr)
{
    attr->__attr = 0;
    return 0;
}

int
pthread_condattr_setclock(pthread_condattr_t *attr, clockid_t clock_id)
{
    attr->__attr = (unsigned)(uintptr_t)clock_id;
    return 0;
}

// pthread
int
pthread_create(pthread_t *restrict thread,
               const pthread_attr_t *restrict attr,
               void *(*start_routine)(void *),
               void *restrict arg)
{
    sweep_threads();
    size_t size = attr && attr->__u.__s[0] ? attr->__u.__s[0] : AIRLOCK_THREAD_STACK;
    if (size < AIRLOCK_THREAD_STACK_MIN) {
        size = AIRLOCK_THREAD_STACK_MIN;
    }
    struct airlock_thread *t = calloc(1, sizeof(*t));
    char *stack = t ? aligned_alloc(16, (size + 15) & ~(size_t)15) : NULL;
    if (!stack) {
        free(t);
        return EAGAIN;
    }
    t->start = start_routine;
    t->arg = arg;
    t->stack = stack;
    static uint32_t words[3];
    words[0] = (uint32_t)(uintptr_t)&errno;
    words[1] = (uint32_t)(uintptr_t)&_Py_tss_tstate;
    words[2] = (uint32_t)(uintptr_t)&airlock_self;
    uint32_t top = (uint32_t)(uintptr_t)(stack + size) & ~15u;
    int32_t err = airlock_threads_spawn((uint32_t)(uintptr_t)t, &t->state, top, (uint32_t)(uintptr_t)words, 3);
    if (err) {
        free(stack);
        free(t);
        return err;
    }
    t->next = airlock_threads;
    airlock_threads = t;
    *thread = (pthread_t)t;
    return 0;
}

int
pthread_detach(pthread_t thread)
{
    struct airlock_thread *t = (struct airlock_thread *)thread;
    if (t == &airlock_main_thread || t->detached) {
        return EINVAL;
    }
    t->detached = 1;
    sweep_threads();
    return 0;
}

int
pthread_join(pthread_t thread, void** value_ptr)
{
    struct airlock_thread *t = (struct airlock_thread *)thread;
    if (t == current()) {
        return EDEADLK;
    }
    if (t == &airlock_main_thread || t->detached) {
        return EINVAL;
    }
    for (int32_t s; (s = t->state) != THREAD_GONE;) {
        airlock_threads_wait(&t->state, s, -1);
    }
    if (value_ptr) {
        *value_ptr = t->result;
    }
    free_thread(t);
    return 0;
}

PyAPI_FUNC(pthread_t) pthread_self(void)
{
    return (pthread_t)current();
}

int
pthread_exit(void *retval)
{
    if (!airlock_self) {
        exit(0);  // the main thread: the stubs' behaviour
    }
    airlock_self->result = retval;
    airlock_threads_exit();
}

int
pthread_attr_init(pthread_attr_t *attr)
{
    memset(attr, 0, sizeof(*attr));
    return 0;
}

int
pthread_attr_setstacksize(
    pthread_attr_t *attr, size_t stacksize)
{
    attr->__u.__s[0] = stacksize;
    return 0;
}

int
pthread_attr_destroy(pthread_attr_t *attr)
{
    return 0;
}

// Thread-specific data: which keys exist is shared, each thread has its
// values (in its descriptor). No destructors, as in the stubs.
#define py_tls_entries (_PyRuntime.threads.stubs.tls_entries)

int
pthread_key_create(pthread_key_t *key, void (*destr_function)(void *))
{
    if (!key) {
        return EINVAL;
    }
    if (destr_function != NULL) {
        Py_FatalError("pthread_key_create destructor is not supported");
    }
    for (pthread_key_t idx = 0; idx < PTHREAD_KEYS_MAX; idx++) {
        if (!py_tls_entries[idx].in_use) {
            py_tls_entries[idx].in_use = true;
            *key = idx;
            return 0;
        }
    }
    return EAGAIN;
}

int
pthread_key_delete(pthread_key_t key)
{
    if (key >= PTHREAD_KEYS_MAX || !py_tls_entries[key].in_use) {
        return EINVAL;
    }
    py_tls_entries[key].in_use = false;
    // Only the running thread's value is cleared: the others' would come
    // back if the key were created again (CPython deletes its keys only
    // at finalization).
    current()->keys[key] = NULL;
    return 0;
}

void *
pthread_getspecific(pthread_key_t key)
{
    if (key >= PTHREAD_KEYS_MAX || !py_tls_entries[key].in_use) {
        return NULL;
    }
    return current()->keys[key];
}

int
pthread_setspecific(pthread_key_t key, const void *value)
{
    if (key >= PTHREAD_KEYS_MAX || !py_tls_entries[key].in_use) {
        return EINVAL;
    }
    current()->keys[key] = (void *)value;
    return 0;
}

// let thread_pthread define the Python API
#include "thread_pthread.h"
