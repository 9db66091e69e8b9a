//go:build airlock_wasmtime && cgo && unix

package wasmtime

// Two things wasmtime-go does not expose, done through wasmtime's C API
// directly (the declarations below match the pinned v39 headers):
//
//   - An epoch deadline callback per store. The epoch is engine-wide, so
//     when one run's context ends and the epoch advances, every running
//     store passes its deadline; the callback lets those whose run is still
//     wanted carry on, and stops only the run whose flag is set.
//   - A memory creator, the counterpart of wazero's allocator (alloc.go): it
//     enforces the run's memory cap itself, so the run learns that the guest
//     asked for more (MemoryLimitHit) and how far memory grew, which
//     wasmtime's store limiter keeps to itself; and it makes the memory in
//     the pooled region Go offers (backend.Region, wasmtime.go's
//     offerRegion), which already reads as the snapshot image, rather
//     than mapping a reservation per run.

/*
#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>

typedef struct wasm_config_t wasm_config_t;
typedef struct wasmtime_store wasmtime_store_t;
typedef struct wasmtime_context wasmtime_context_t;
typedef struct wasmtime_error wasmtime_error_t;
typedef struct wasm_memorytype_t wasm_memorytype_t;
typedef uint8_t wasmtime_update_deadline_kind_t;

typedef uint8_t *(*wasmtime_memory_get_callback_t)(void *env, size_t *byte_size, size_t *byte_capacity);
typedef wasmtime_error_t *(*wasmtime_memory_grow_callback_t)(void *env, size_t new_size);
typedef struct wasmtime_linear_memory {
	void *env;
	wasmtime_memory_get_callback_t get_memory;
	wasmtime_memory_grow_callback_t grow_memory;
	void (*finalizer)(void *);
} wasmtime_linear_memory_t;
typedef wasmtime_error_t *(*wasmtime_new_memory_callback_t)(void *env, const wasm_memorytype_t *ty,
	size_t minimum, size_t maximum, size_t reserved_size_in_bytes, size_t guard_size_in_bytes,
	wasmtime_linear_memory_t *memory_ret);
typedef struct wasmtime_memory_creator {
	void *env;
	wasmtime_new_memory_callback_t new_memory;
	void (*finalizer)(void *);
} wasmtime_memory_creator_t;

extern void wasmtime_store_epoch_deadline_callback(wasmtime_store_t *store,
	wasmtime_error_t *(*func)(wasmtime_context_t *, void *, uint64_t *, wasmtime_update_deadline_kind_t *),
	void *data, void (*finalizer)(void *));
extern void wasmtime_config_host_memory_creator_set(wasm_config_t *, wasmtime_memory_creator_t *);
extern wasmtime_error_t *wasmtime_error_new(const char *);

// One run's memory and flags, allocated by Go with malloc and freed by Go
// after the store is closed.
typedef struct {
	int32_t  stop;      // set when the run's context ends
	int32_t  hit;       // the guest asked to grow past limit
	size_t   limit;     // the cap, bytes
	size_t   peak;      // the largest size reached
	uint8_t *base;      // the reservation
	size_t   size;      // the memory's size
	size_t   open;      // the bytes readable and writable, at least size
	size_t   capacity;  // bytes usable without moving
	size_t   mapped;    // the whole mapping, guard included
	size_t   wanted;    // the reservation and guard wasmtime asked for
	// A region Go took for the run (backend.Region): the image's
	// memory, then inaccessible pages. The memory is made in it when it is
	// large enough; pooled then says so, and Go takes it back after the
	// store is closed instead of it being unmapped.
	uint8_t *offered;
	size_t   offered_len;
	size_t   offered_open; // readable and writable from its start: the image
	int32_t  pooled;
} airlock_run;

static wasmtime_error_t *airlock_epoch(wasmtime_context_t *ctx, void *data, uint64_t *delta, wasmtime_update_deadline_kind_t *kind) {
	airlock_run *r = data;
	if (__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		return wasmtime_error_new("airlock: run interrupted");
	}
	*delta = 1;
	*kind = 0;
	return NULL;
}

static void airlock_watch_epoch(void *store, airlock_run *r) {
	wasmtime_store_epoch_deadline_callback(store, airlock_epoch, r, NULL);
}

static void airlock_stop(airlock_run *r) { __atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE); }

// The run whose instance is being created on this thread; set around
// instantiation, which creates the memory synchronously.
static __thread airlock_run *airlock_pending;

static void airlock_set_pending(airlock_run *r) { airlock_pending = r; }

static uint8_t *airlock_get_memory(void *env, size_t *size, size_t *capacity) {
	airlock_run *r = env;
	*size = r->size;
	*capacity = r->capacity;
	return r->base;
}

static wasmtime_error_t *airlock_grow_memory(void *env, size_t new_size) {
	airlock_run *r = env;
	if (new_size > r->limit) {
		r->hit = 1;
		return wasmtime_error_new("airlock: memory limit");
	}
	if (new_size > r->capacity) {
		return wasmtime_error_new("airlock: memory reservation exhausted");
	}
	// An offered region's image part is open already: growing into it
	// takes no mprotect (and no turn of the process's memory-map lock).
	if (new_size > r->open) {
		if (mprotect(r->base, new_size, PROT_READ | PROT_WRITE) != 0) {
			return wasmtime_error_new("airlock: mprotect failed");
		}
		r->open = new_size;
	}
	if (new_size > r->size) {
		r->size = new_size;
	}
	if (new_size > r->peak) {
		r->peak = new_size;
	}
	return NULL;
}

static void airlock_free_memory(void *env) {
	airlock_run *r = env;
	if (r->base != NULL && !r->pooled) {
		munmap(r->base, r->mapped);
		r->base = NULL;
	}
}

static wasmtime_error_t *airlock_new_memory(void *env, const wasm_memorytype_t *ty, size_t minimum, size_t maximum,
		size_t reserved, size_t guard, wasmtime_linear_memory_t *ret) {
	airlock_run *r = airlock_pending;
	if (r == NULL) {
		return wasmtime_error_new("airlock: memory created outside a run");
	}
	airlock_pending = NULL;
	if (r->base != NULL) {
		return wasmtime_error_new("airlock: one memory per run");
	}
	if (minimum > r->limit) {
		r->hit = 1;
		return wasmtime_error_new("airlock: memory limit below the module's minimum");
	}
	// Without a reservation asked for, reserve up to the cap so the memory
	// never moves; either way the pages past the size stay inaccessible.
	size_t capacity = reserved > 0 ? reserved : r->limit;
	if (maximum < capacity && reserved == 0) {
		capacity = maximum;
	}
	size_t mapped = capacity + guard;
	r->wanted = mapped;
	void *base;
	size_t open = 0;
	if (r->offered != NULL && r->offered_len >= mapped) {
		// Open up to the image's end, which is at least the module's
		// minimum; no guest code runs before Go grows the memory there.
		base = r->offered;
		mapped = r->offered_len;
		open = r->offered_open;
		r->offered = NULL;
		r->pooled = 1;
	} else {
		base = mmap(NULL, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (base == MAP_FAILED) {
			return wasmtime_error_new("airlock: cannot reserve memory");
		}
	}
	if (minimum > open) {
		if (mprotect(base, minimum, PROT_READ | PROT_WRITE) != 0) {
			if (!r->pooled) { // else Go takes the region back
				munmap(base, mapped);
			}
			return wasmtime_error_new("airlock: mprotect failed");
		}
		open = minimum;
	}
	r->base = base;
	r->open = open;
	r->size = minimum;
	r->peak = minimum;
	r->capacity = capacity;
	r->mapped = mapped;
	ret->env = r;
	ret->get_memory = airlock_get_memory;
	ret->grow_memory = airlock_grow_memory;
	ret->finalizer = airlock_free_memory;
	return NULL;
}

static void airlock_set_memory_creator(void *config) {
	wasmtime_memory_creator_t c = { NULL, airlock_new_memory, NULL };
	wasmtime_config_host_memory_creator_set(config, &c);
}
*/
import "C"

import (
	"runtime"
	"unsafe"

	wasmtime "github.com/bytecodealliance/wasmtime-go/v39"
)

// cRun is one run's C-side state (memory, cap, stop flag).
type cRun struct{ p *C.airlock_run }

func newCRun(limit uint64) cRun {
	p := (*C.airlock_run)(C.calloc(1, C.size_t(unsafe.Sizeof(C.airlock_run{}))))
	p.limit = C.size_t(limit)
	return cRun{p}
}

// free releases the state; the store must be closed first (its memory's
// finalizer has then unmapped the reservation, unless it was offered).
func (r cRun) free() {
	C.airlock_free_memory(unsafe.Pointer(r.p))
	C.free(unsafe.Pointer(r.p))
}

func (r cRun) stop()          { C.airlock_stop(r.p) }
func (r cRun) hit() bool      { return r.p.hit != 0 }
func (r cRun) peak() uint64   { return uint64(r.p.peak) }
func (r cRun) open() int      { return int(r.p.open) }
func (r cRun) memory() []byte { return unsafe.Slice((*byte)(unsafe.Pointer(r.p.base)), int(r.p.size)) }

// offer has the memory made in region (mapped outside Go's heap) when it
// is as large as wasmtime asks; its first open bytes are readable and
// writable, the rest inaccessible. pooled tells whether it was taken.
func (r cRun) offer(region []byte, open int) {
	r.p.offered = (*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(region)))
	r.p.offered_len = C.size_t(len(region))
	r.p.offered_open = C.size_t(open)
}

func (r cRun) pooled() bool { return r.p.pooled != 0 }

// wanted is the reservation and guard wasmtime asked for, once the memory
// was made: the size of region to offer the next run.
func (r cRun) wanted() uint64 { return uint64(r.p.wanted) }

// watchEpoch installs the epoch deadline callback on store.
func (r cRun) watchEpoch(store *wasmtime.Store) {
	C.airlock_watch_epoch(storePtr(store), r.p)
	runtime.KeepAlive(store)
}

// instantiate runs fn (which instantiates the module) with r as the owner
// of the memory it creates. The thread stays the same throughout.
func (r cRun) instantiate(fn func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	C.airlock_set_pending(r.p)
	defer C.airlock_set_pending(nil)
	fn()
}

// setMemoryCreator makes cfg's instances use cRun memories.
func setMemoryCreator(cfg *wasmtime.Config) {
	C.airlock_set_memory_creator(configPtr(cfg))
	runtime.KeepAlive(cfg)
}

// storePtr and configPtr read the C pointer wasmtime-go keeps as the first
// field of Store and Config (true of v39, which go.mod pins: every run
// goes through both, so any engine test fails on another layout).
func storePtr(s *wasmtime.Store) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(s))
}

func configPtr(c *wasmtime.Config) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(c))
}
