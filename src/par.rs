//! Spreading independent per-item work over the cores, with std's scoped threads only. Used where a
//! verb touches every unit (`list`); small inputs stay on the calling thread.

/// Below this many items, starting threads costs more than it saves.
const MIN_ITEMS: usize = 64;

fn threads_for(len: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    if len < MIN_ITEMS {
        1
    } else {
        cores
    }
}

/// `f` over every item, results in order.
pub fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = threads_for(items.len());
    if threads < 2 {
        return items.iter().map(f).collect();
    }
    let f = &f;
    std::thread::scope(|scope| {
        let workers: Vec<_> = items
            .chunks(items.len().div_ceil(threads))
            .map(|part| scope.spawn(move || part.iter().map(f).collect::<Vec<R>>()))
            .collect();
        workers.into_iter().flat_map(join).collect()
    })
}

/// `f` over every item, taking each by value, results in order. The items are also dropped on the
/// worker threads, which for large values is a good part of the work.
pub fn map_owned<T: Send, R: Send>(mut items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let threads = threads_for(items.len());
    if threads < 2 {
        return items.into_iter().map(f).collect();
    }
    let size = items.len().div_ceil(threads);
    let mut parts = Vec::with_capacity(threads);
    while items.len() > size {
        let tail = items.split_off(items.len() - size);
        parts.push(tail);
    }
    parts.push(items);
    parts.reverse();
    let f = &f;
    std::thread::scope(|scope| {
        let workers: Vec<_> = parts
            .into_iter()
            .map(|part| scope.spawn(move || part.into_iter().map(f).collect::<Vec<R>>()))
            .collect();
        workers.into_iter().flat_map(join).collect()
    })
}

fn join<R>(worker: std::thread::ScopedJoinHandle<'_, Vec<R>>) -> Vec<R> {
    // A panic in a worker is a bug; carry it to the caller rather than losing it.
    worker
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_keep_the_input_order() {
        let items: Vec<usize> = (0..1000).collect();
        assert_eq!(
            super::map(&items, |n| n * 2),
            (0..1000).map(|n| n * 2).collect::<Vec<_>>()
        );
        assert_eq!(
            super::map_owned(items.clone(), |n| n + 1),
            (1..1001).collect::<Vec<_>>()
        );
        assert_eq!(super::map_owned(vec![1, 2, 3], |n| n), [1, 2, 3]);
        assert!(super::map_owned(Vec::<u8>::new(), |n| n).is_empty());
    }
}
