//! The per-engine lock that makes the engine, its buffers and its graphs `Sync`.
//!
//! The library lets an engine be used from any thread but by one thread at a time: calls that
//! name the same engine must not overlap. Every call these bindings make on an engine (an
//! operation, a copy, a free from a buffer's `Drop`, a graph launch or destruction) holds this
//! lock. It is re-entrant because a graph capture calls back into the host's step on the
//! capturing thread while the capture itself holds the lock: the step's operations take it
//! again on the same thread, while any other thread waits until the capture is over.

use std::marker::PhantomData;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, ThreadId};

#[derive(Default)]
struct Owner {
    thread: Option<ThreadId>,
    depth: usize,
}

/// A re-entrant lock (std offers none on stable Rust): one owning thread, a nesting depth.
#[derive(Default)]
pub(crate) struct EngineLock {
    owner: Mutex<Owner>,
    released: Condvar,
}

/// Proof that the current thread holds an [`EngineLock`]; released when dropped. Not `Send`:
/// it must be released by the thread that took it.
pub(crate) struct LockGuard<'a> {
    lock: &'a EngineLock,
    _not_send: PhantomData<*const ()>,
}

impl EngineLock {
    fn owner(&self) -> MutexGuard<'_, Owner> {
        // The inner mutex is only held for a few instructions that cannot panic, so it is never
        // poisoned in practice; if it were, its data (an id and a counter) is still consistent.
        self.owner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Blocks until no other thread holds the lock, then takes it (again, if this thread
    /// already holds it).
    pub(crate) fn lock(&self) -> LockGuard<'_> {
        let me = thread::current().id();
        let mut owner = self.owner();
        loop {
            match owner.thread {
                None => {
                    owner.thread = Some(me);
                    owner.depth = 1;
                    break;
                }
                Some(t) if t == me => {
                    owner.depth += 1;
                    break;
                }
                Some(_) => {
                    owner = self
                        .released
                        .wait(owner)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
        }
        LockGuard {
            lock: self,
            _not_send: PhantomData,
        }
    }
}

impl Drop for LockGuard<'_> {
    fn drop(&mut self) {
        let mut owner = self.lock.owner();
        owner.depth -= 1;
        if owner.depth == 0 {
            owner.thread = None;
            drop(owner);
            self.lock.released.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn the_owning_thread_may_lock_again() {
        let lock = EngineLock::default();
        let outer = lock.lock();
        let inner = lock.lock();
        drop(inner);
        drop(outer);
        let again = lock.lock();
        drop(again);
    }

    #[test]
    fn other_threads_wait_until_the_last_guard_is_gone() {
        let lock = Arc::new(EngineLock::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (lock, inside, most) = (lock.clone(), inside.clone(), most.clone());
                thread::spawn(move || {
                    for _ in 0..200 {
                        let _outer = lock.lock();
                        let _inner = lock.lock();
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert_eq!(
            most.load(Ordering::SeqCst),
            1,
            "two threads held the lock at once"
        );
    }
}
