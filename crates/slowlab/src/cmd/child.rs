//! `slowlab __child …`: small programs that slowlab launches as child
//! processes of its own experiments and tests. Hidden from `--help`; not a
//! user interface.
//!
//! - the lab's children (`slowlab_lab::children`);
//! - `burn MODEL N [--scale S]`: CPU-bound work whose cost grows as MODEL
//!   (n, nlogn, n2, n3) — the known workloads of the sweep tests and
//!   benchmarks.

use std::hint::black_box;

use clap::{Args, Subcommand, ValueEnum};

#[derive(Args, Debug)]
pub struct ChildArgs {
    #[command(subcommand)]
    program: ChildProgram,
}

#[derive(Subcommand, Debug)]
enum ChildProgram {
    #[command(flatten)]
    Lab(slowlab_lab::children::LabChild),
    /// CPU-bound work of known complexity.
    Burn {
        #[arg(value_enum)]
        model: BurnModel,
        n: u64,
        /// Multiplies the work (not the memory).
        #[arg(long, default_value_t = 1)]
        scale: u64,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum BurnModel {
    /// n steps of arithmetic, repeated `scale` times.
    N,
    /// Sorting n pseudo-random numbers, `scale` times.
    Nlogn,
    /// n² steps of arithmetic, repeated `scale` times.
    N2,
    /// n³ steps of arithmetic, repeated `scale` times.
    N3,
}

pub fn run(args: ChildArgs) -> anyhow::Result<i32> {
    match args.program {
        ChildProgram::Lab(child) => match slowlab_lab::children::run(child) {
            Ok(()) => Ok(0),
            Err(message) => {
                eprintln!("slowlab __child: {message}");
                Ok(1)
            }
        },
        ChildProgram::Burn { model, n, scale } => {
            black_box(burn(model, n, scale));
            Ok(0)
        }
    }
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

fn burn(model: BurnModel, n: u64, scale: u64) -> u64 {
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
