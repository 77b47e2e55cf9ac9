// A writer-preferring shared mutex. std::shared_mutex on glibc prefers readers,
// so a steady stream of searches could starve the one writer forever.
#ifndef ZEROVEC_INDEX_RWLOCK_H_
#define ZEROVEC_INDEX_RWLOCK_H_

#include <pthread.h>

namespace zv::index {

class RwLock {
 public:
  RwLock() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr,
                                  PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&lock_, &attr);
    pthread_rwlockattr_destroy(&attr);
  }
  ~RwLock() { pthread_rwlock_destroy(&lock_); }
  RwLock(const RwLock&) = delete;
  RwLock& operator=(const RwLock&) = delete;

  // BasicLockable / SharedLockable, for std::unique_lock and std::shared_lock.
  void lock() { pthread_rwlock_wrlock(&lock_); }
  void unlock() { pthread_rwlock_unlock(&lock_); }
  void lock_shared() { pthread_rwlock_rdlock(&lock_); }
  void unlock_shared() { pthread_rwlock_unlock(&lock_); }

 private:
  pthread_rwlock_t lock_;
};

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_RWLOCK_H_
