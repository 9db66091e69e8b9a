/* memcpy, memmove and memset for the own build, linked ahead of
 * wasi-libc's.
 *
 * CPython is compiled without bulk memory, so its copies and fills are
 * calls to these, and they use memory.copy / memory.fill only past 32
 * bytes, in functions of their own. The reason is wazero: it runs both
 * instructions by calling Go's memmove, which may clobber every SIMD
 * register, so each function that contains one saves and restores eight
 * of them on every call, taken or not; memory.fill is a loop of such
 * calls. Compiled in, they sat in 685 functions, the evaluation loop and
 * object allocation among them. Short operations are a few word loads and
 * stores here, with no loop (a loop would take the engine's loop budget).
 */
#include <stddef.h>
#include <stdint.h>

#define BULK_THRESHOLD 32

static inline uint64_t load64(const unsigned char *p) { uint64_t v; __builtin_memcpy(&v, p, 8); return v; }
static inline uint32_t load32(const unsigned char *p) { uint32_t v; __builtin_memcpy(&v, p, 4); return v; }
static inline uint16_t load16(const unsigned char *p) { uint16_t v; __builtin_memcpy(&v, p, 2); return v; }
static inline void store64(unsigned char *p, uint64_t v) { __builtin_memcpy(p, &v, 8); }
static inline void store32(unsigned char *p, uint32_t v) { __builtin_memcpy(p, &v, 4); }
static inline void store16(unsigned char *p, uint16_t v) { __builtin_memcpy(p, &v, 2); }

/* Not inlined by clang (noinline) nor by wasm-opt (--no-inline, in the
   build script), or memcpy itself would hold the instruction. */
__attribute__((noinline)) void airlock_bulk_move(void *d, const void *s, size_t n) { __builtin_memmove(d, s, n); }
__attribute__((noinline)) void airlock_bulk_fill(void *d, int c, size_t n) { __builtin_memset(d, c, n); }

/* Moves n <= 32 bytes: every load before any store, so overlap is fine. */
static inline void small_move(unsigned char *d, const unsigned char *s, size_t n)
{
	if (n >= 16) {
		uint64_t a = load64(s), b = load64(s + 8), y = load64(s + n - 16), z = load64(s + n - 8);
		store64(d, a); store64(d + 8, b); store64(d + n - 16, y); store64(d + n - 8, z);
	} else if (n >= 8) {
		uint64_t a = load64(s), z = load64(s + n - 8);
		store64(d, a); store64(d + n - 8, z);
	} else if (n >= 4) {
		uint32_t a = load32(s), z = load32(s + n - 4);
		store32(d, a); store32(d + n - 4, z);
	} else if (n >= 2) {
		uint16_t a = load16(s), z = load16(s + n - 2);
		store16(d, a); store16(d + n - 2, z);
	} else if (n == 1) {
		*d = *s;
	}
}

void *memcpy(void *restrict dest, const void *restrict src, size_t n)
{
	if (n > BULK_THRESHOLD)
		airlock_bulk_move(dest, src, n);
	else
		small_move(dest, src, n);
	return dest;
}

void *memmove(void *dest, const void *src, size_t n)
{
	if (n > BULK_THRESHOLD)
		airlock_bulk_move(dest, src, n);
	else
		small_move(dest, src, n);
	return dest;
}

void *memset(void *dest, int c, size_t n)
{
	unsigned char *d = dest;
	if (n > BULK_THRESHOLD) {
		airlock_bulk_fill(dest, c, n);
		return dest;
	}
	uint64_t v = (uint64_t)(unsigned char)c * 0x0101010101010101ULL;
	if (n >= 16) {
		store64(d, v); store64(d + 8, v); store64(d + n - 16, v); store64(d + n - 8, v);
	} else if (n >= 8) {
		store64(d, v); store64(d + n - 8, v);
	} else if (n >= 4) {
		store32(d, (uint32_t)v); store32(d + n - 4, (uint32_t)v);
	} else if (n >= 2) {
		store16(d, (uint16_t)v); store16(d + n - 2, (uint16_t)v);
	} else if (n == 1) {
		*d = (unsigned char)c;
	}
	return dest;
}
