//! How fast this machine reads memory: the roof under a decode step, which reads every weight
//! of the model once per token (`cargo xtask bench generator` reports each runtime's decode as
//! a fraction of it).

use std::time::Instant;

/// The best rate, in bytes per second, at which `threads` threads read a buffer of `bytes`
/// (each its own contiguous share, summed as 64-bit words), over `rounds` reads of the whole
/// buffer. The buffer is written first, so that every page is in memory before the clock
/// starts. `None` when there is nothing to read.
pub fn read_rate(bytes: usize, threads: usize, rounds: usize) -> Option<f64> {
    let words = bytes / 8;
    let threads = threads.max(1);
    if words < threads || rounds == 0 {
        return None;
    }
    let buffer: Vec<u64> = (0..words as u64).collect();
    let share = words.div_ceil(threads);
    let mut best = f64::INFINITY;
    for _ in 0..rounds {
        let started = Instant::now();
        let total = std::thread::scope(|scope| {
            let readers: Vec<_> = buffer
                .chunks(share)
                .map(|part| scope.spawn(move || sum(part)))
                .collect();
            readers
                .into_iter()
                .map(|reader| reader.join().unwrap_or(0))
                .fold(0u64, u64::wrapping_add)
        });
        best = best.min(started.elapsed().as_secs_f64());
        std::hint::black_box(total);
    }
    #[allow(clippy::cast_precision_loss)]
    Some((words * 8) as f64 / best)
}

/// The wrapping sum of `words`, in 8 independent lanes so that the loads are not serialised
/// behind one chain of additions.
fn sum(words: &[u64]) -> u64 {
    let mut lanes = [0u64; 8];
    let (chunks, rest) = words.as_chunks::<8>();
    for chunk in chunks {
        for (lane, word) in lanes.iter_mut().zip(chunk) {
            *lane = lane.wrapping_add(*word);
        }
    }
    let rest = rest.iter().fold(0u64, |a, &w| a.wrapping_add(w));
    lanes.iter().fold(rest, |a, &l| a.wrapping_add(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_has_a_finite_positive_rate_and_nothing_to_read_has_none() {
        let rate = read_rate(8 << 20, 2, 2).unwrap();
        assert!(rate.is_finite() && rate > 1e6, "{rate} bytes/s");
        assert!(read_rate(8, 2, 1).is_none());
        assert!(read_rate(1 << 20, 1, 0).is_none());
        for n in [0u64, 7, 20, 64, 100, 1000] {
            assert_eq!(
                sum(&(0..n).collect::<Vec<u64>>()),
                n * n.saturating_sub(1) / 2,
                "{n}"
            );
        }
    }
}
