//! `slowlab __child burn MODEL N`: CPU-bound work whose cost grows as a
//! known function of n (n, n log n, n², n³) — the known workloads of the
//! sweep's tests and benchmarks, whose verdicts must come out as the model.
//!
//! What it does not do: measure itself (the sweep times it from outside).

use std::hint::black_box;

use clap::ValueEnum;

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum BurnModel {
    /// n steps of arithmetic, repeated `scale` times.
    N,
    /// Sorting n pseudo-random numbers, `scale` times.
    Nlogn,
    /// n² steps of arithmetic, repeated `scale` times.
    N2,
    /// n³ steps of arithmetic, repeated `scale` times.
    N3,
}

/// One step of a 64-bit linear congruential generator (Knuth's MMIX
/// constants), passed through `black_box` so that the optimizer can neither
/// remove the loop nor compute its result in closed form.
fn lcg(x: u64) -> u64 {
    black_box(
        x.wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407),
    )
}

/// Does the work of `model` at size `n`, `scale` times over; the result
/// only keeps the optimizer from removing it.
pub fn burn(model: BurnModel, n: u64, scale: u64) -> u64 {
    let mut x = black_box(n);
    match model {
        BurnModel::N => {
            for _ in 0..n.saturating_mul(scale) {
                x = lcg(x);
            }
        }
        BurnModel::Nlogn => {
            for _ in 0..scale {
                let mut values: Vec<u64> = (0..n)
                    .map(|_| {
                        x = lcg(x);
                        x >> 11
                    })
                    .collect();
                values.sort_unstable();
                x ^= values.get(values.len() / 2).copied().unwrap_or(0);
            }
        }
        BurnModel::N2 => {
            for _ in 0..scale {
                for _ in 0..n {
                    for _ in 0..n {
                        x = lcg(x);
                    }
                }
            }
        }
        BurnModel::N3 => {
            for _ in 0..scale {
                for _ in 0..n {
                    for _ in 0..n {
                        for _ in 0..n {
                            x = lcg(x);
                        }
                    }
                }
            }
        }
    }
    x
}
