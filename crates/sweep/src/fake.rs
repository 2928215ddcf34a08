//! A fake executor with a known cost curve and seeded noise, so that the
//! whole sweep (statistics, verdict, adaptivity, budget) can be tested
//! exactly and reproducibly, without running anything.
//!
//! Noise is multiplicative and log-normal (`t·exp(σ·z)`), plus optional rare
//! slow-downs that imitate another process stealing the CPU. Wall time is the
//! CPU time times a fixed factor. Nothing here measures anything real.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::executor::{Executor, Measurement, RunError};

/// A cost curve in seconds of CPU time for a size n.
pub type CostCurve = Box<dyn Fn(f64) -> f64 + Send>;

pub struct FakeExecutor {
    cost: CostCurve,
    rng: ChaCha8Rng,
    /// Standard deviation of the log-normal noise (0.05 ≈ ±5%).
    pub sigma: f64,
    /// Probability that a run is hit by a slow-down.
    pub spike_probability: f64,
    /// Largest extra factor of a slow-down (uniform in 1..1+this).
    pub spike_size: f64,
    /// wall_s = cpu_s × this.
    pub wall_factor: f64,
    /// Fail with a non-zero exit at this size.
    pub fail_at: Option<u64>,
    /// Every size run, in order: lets tests check the schedule.
    pub log: Vec<u64>,
}

impl FakeExecutor {
    pub fn new(seed: u64, cost: impl Fn(f64) -> f64 + Send + 'static) -> Self {
        FakeExecutor {
            cost: Box::new(cost),
            rng: ChaCha8Rng::seed_from_u64(seed),
            sigma: 0.0,
            spike_probability: 0.0,
            spike_size: 0.0,
            wall_factor: 1.0,
            fail_at: None,
            log: Vec::new(),
        }
    }

    pub fn with_noise(mut self, sigma: f64) -> Self {
        self.sigma = sigma;
        self
    }

    pub fn with_spikes(mut self, probability: f64, size: f64) -> Self {
        self.spike_probability = probability;
        self.spike_size = size;
        self
    }

    /// A standard normal draw (Box–Muller).
    fn normal(&mut self) -> f64 {
        let u1: f64 = self.rng.random_range(f64::EPSILON..1.0);
        let u2: f64 = self.rng.random_range(0.0..1.0);
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

impl Executor for FakeExecutor {
    fn run(&mut self, n: u64) -> Result<Measurement, RunError> {
        self.log.push(n);
        if self.fail_at == Some(n) {
            return Err(RunError::Failed {
                n,
                status: "exit code 1".into(),
                stderr_tail: "fake failure".into(),
            });
        }
        let mut cpu = (self.cost)(n as f64) * (self.sigma * self.normal()).exp();
        if self.spike_probability > 0.0 && self.rng.random_range(0.0..1.0) < self.spike_probability
        {
            cpu *= 1.0 + self.rng.random_range(0.0..1.0) * self.spike_size;
        }
        Ok(Measurement {
            cpu_s: cpu,
            wall_s: cpu * self.wall_factor,
            stdout: None,
        })
    }
}
