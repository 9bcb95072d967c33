// Mutexes the compiler checks: Clang's thread-safety analysis (-Wthread-safety, the clang builds)
// proves that every member marked GUARDED_BY(mu_) is touched only with mu_ held and that every
// function marked REQUIRES(mu_) is called with it held. libstdc++'s std::mutex carries no such
// attributes, so every class that locks uses these wrappers instead. Under gcc the macros are
// empty and the types are thin wrappers over std::mutex and std::shared_mutex.
//
//   class Counter {
//     void Add() EXCLUDES(mu_) { MutexLock l(mu_); AddLocked(); }
//     void AddLocked() REQUIRES(mu_) { ++n_; }
//     Mutex mu_;
//     int n_ GUARDED_BY(mu_) = 0;
//   };
//
// Waiting on a std::condition_variable: `cv.wait(l.native())` (the analysis sees the lock held
// before and after, as it is). A predicate lambda is a function of its own to the analysis, so
// waits that read guarded members are written as loops: `while (!ready_) cv.wait(l.native());`.
#pragma once

#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define BDN_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define BDN_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) BDN_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY BDN_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) BDN_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) BDN_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) BDN_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) BDN_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) BDN_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) BDN_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) BDN_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) BDN_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) BDN_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) BDN_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) BDN_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) BDN_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) BDN_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) BDN_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) BDN_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS BDN_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace bdn {

// std::mutex (Mutex) or std::shared_mutex (SharedMutex: WriterLock holds it exclusively,
// ReaderLock shared) with the capability attribute. Also BasicLockable (lock/unlock), for code
// that needs a standard lock type; prefer the scoped locks below, which the analysis follows.
template <typename Native>
class CAPABILITY("mutex") BasicMutex {
 public:
  BasicMutex() = default;
  BasicMutex(const BasicMutex&) = delete;
  BasicMutex& operator=(const BasicMutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // SharedMutex only (instantiated only where used).
  void lock_shared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlock_shared() RELEASE_SHARED() { mu_.unlock_shared(); }
  // Tells the analysis that the caller holds this mutex (where it cannot see that it does).
  void AssertHeld() const ASSERT_CAPABILITY(this) {}
  // The wrapped mutex, for a standard lock handed to an interface that takes one.
  Native& native() RETURN_CAPABILITY(this) { return mu_; }

 private:
  Native mu_;
};
using Mutex = BasicMutex<std::mutex>;
using SharedMutex = BasicMutex<std::shared_mutex>;

// Holds a Mutex (MutexLock) or a SharedMutex exclusively (WriterLock) for its scope, a
// std::unique_lock underneath: Unlock and Lock again in between, and native() for
// std::condition_variable(_any) waits and Clock::WaitUntil; a wait gives the mutex up and takes it
// again before it returns, so it is held across the call as the analysis assumes.
template <typename M, typename Native>
class SCOPED_CAPABILITY ExclusiveLock {
 public:
  explicit ExclusiveLock(M& mu) ACQUIRE(mu) : lock_(mu.native()) {}
  ~ExclusiveLock() RELEASE() {}
  ExclusiveLock(const ExclusiveLock&) = delete;
  ExclusiveLock& operator=(const ExclusiveLock&) = delete;

  void Unlock() RELEASE() { lock_.unlock(); }
  void Lock() ACQUIRE() { lock_.lock(); }
  std::unique_lock<Native>& native() { return lock_; }

 private:
  std::unique_lock<Native> lock_;
};
using MutexLock = ExclusiveLock<Mutex, std::mutex>;
using WriterLock = ExclusiveLock<SharedMutex, std::shared_mutex>;

// Holds a SharedMutex shared for its scope.
class SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) ACQUIRE_SHARED(mu) : lock_(mu.native()) {}
  ~ReaderLock() RELEASE() {}
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

  void Unlock() RELEASE() { lock_.unlock(); }
  void Lock() ACQUIRE_SHARED() { lock_.lock(); }
  std::shared_lock<std::shared_mutex>& native() { return lock_; }

 private:
  std::shared_lock<std::shared_mutex> lock_;
};

}  // namespace bdn
