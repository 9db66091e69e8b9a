/* std::mutex, std::recursive_mutex, std::unique_lock,
 * std::condition_variable and std::thread for a libc++ without threads
 * (WASI has none), force-included into the chart stage's C++ by
 * build-charts.sh. pybind11's internals lock a std::mutex (every pybind11
 * module must see the same one, as they share those internals),
 * kiwisolver a std::recursive_mutex; contourpy's ThreadedContourGenerator
 * runs on std::thread::hardware_concurrency() threads, here 1: its chunk
 * loop runs on the calling thread and never makes a std::thread, so the
 * mutex and the barrier have nothing to wait for. A wait that would block
 * (another thread expected) aborts rather than hang. */
#ifndef AIRLOCK_SINGLE_THREAD_H
#define AIRLOCK_SINGLE_THREAD_H
#ifdef __cplusplus
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace std {
inline namespace __airlock_single_thread {
struct mutex {
	void lock() {}
	bool try_lock() { return true; }
	void unlock() {}
};

struct recursive_mutex {
	void lock() {}
	bool try_lock() { return true; }
	void unlock() {}
};

template <class M>
class unique_lock {
public:
	explicit unique_lock(M &m) : m_(&m) { m_->lock(); }
	~unique_lock() { if (m_) m_->unlock(); }
	unique_lock(const unique_lock &) = delete;
	unique_lock &operator=(const unique_lock &) = delete;
	void lock() {}
	void unlock() {}
	bool owns_lock() const { return m_ != nullptr; }
private:
	M *m_;
};

struct condition_variable {
	void notify_one() {}
	void notify_all() {}
	template <class L>
	void wait(L &) {
		fputs("single_thread.h: a wait for another thread, which WASI has none of\n", stderr);
		abort();
	}
};

struct thread {
	thread() = default;
	template <class F, class... A>
	explicit thread(F &&, A &&...) {
		fputs("single_thread.h: a new thread, which WASI has none of\n", stderr);
		abort();
	}
	void join() {}
	static unsigned hardware_concurrency() { return 1; }
};
}
}
#endif
#endif
