//! Log-log SVG plots of sweeps: every run as a small dot (the spread), the
//! median of each size as a larger mark, the fitted power law over the top
//! sizes as a line, and the verdict line as the title. One or more series
//! (e.g. a pathological and a control variant) share the axes. A profiled
//! sweep adds one series per top function (its inclusive CPU cost,
//! samples × the sampling period).
//!
//! Drawn by hand rather than with `plotters`: a log-log scatter with a
//! line is ~150 lines of SVG, whereas plotters' SVG backend needs font
//! metrics support for text layout and brings a large dependency tree. The
//! output is self-contained (no fonts, scripts or external references).

use slowlab_model::results::{FunctionGrowth, FunctionVerdict, Point, SweepResult};
use slowlab_sweep::stats::median;

use crate::format;

/// One series to draw: costs per run above `baseline_s`.
pub struct Series<'a> {
    pub label: String,
    pub points: &'a [Point],
    pub baseline_s: f64,
    /// Exponent of the fitted line through the top three medians, if any.
    pub exponent: Option<f64>,
}

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 460.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 60.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 4] = ["#c0392b", "#2471a3", "#229954", "#7d3c98"];

/// The plot of one sweep result, titled with its verdict line.
pub fn sweep_svg(result: &SweepResult) -> String {
    let baseline_s = result
        .baseline
        .as_ref()
        .map_or(0.0, |b| median(&b.cpu_s))
        .max(0.0);
    let function_points: Vec<(&FunctionGrowth, Vec<Point>, f64)> = result
        .profile_period_s
        .map(|period| plotted_functions(result, period))
        .unwrap_or_default();
    let mut series = vec![Series {
        label: result.command.join(" "),
        points: &result.points,
        baseline_s: if baseline_s.is_finite() {
            baseline_s
        } else {
            0.0
        },
        exponent: result.exponent,
    }];
    for (f, points, baseline_s) in &function_points {
        series.push(Series {
            label: format!("{} (with callees)", f.name),
            points,
            baseline_s: *baseline_s,
            exponent: f.exponent,
        });
    }
    let title = crate::sweep::verdict_line(result);
    series_svg(&title, "CPU seconds above baseline", &series)
}

/// Functions plotted beside the command at most (one colour each).
const PLOTTED_FUNCTIONS: usize = COLORS.len() - 1;

/// The first fitted functions of a profiled sweep as points of CPU seconds
/// per run (samples × `period_s`), with their baseline's median.
fn plotted_functions(
    result: &SweepResult,
    period_s: f64,
) -> Vec<(&FunctionGrowth, Vec<Point>, f64)> {
    result
        .functions
        .iter()
        .filter(|f| f.verdict != FunctionVerdict::TooFewSamples && f.exponent.is_some())
        .take(PLOTTED_FUNCTIONS)
        .map(|f| {
            let cost = |samples: &[u64]| -> Vec<f64> {
                samples.iter().map(|&s| s as f64 * period_s).collect()
            };
            let points: Vec<Point> = f
                .points
                .iter()
                .filter(|p| p.n > 0)
                .map(|p| Point {
                    n: p.n,
                    cpu_s: cost(&p.samples),
                    wall_s: cost(&p.samples),
                })
                .collect();
            let baseline_s = f
                .points
                .iter()
                .find(|p| p.n == 0)
                .map(|p| Point {
                    n: 0,
                    cpu_s: cost(&p.samples),
                    wall_s: Vec::new(),
                })
                .map_or(0.0, |p| median(&p.cpu_s))
                .max(0.0);
            (f, points, baseline_s)
        })
        .collect()
}

/// Several series on shared log-log axes.
pub fn series_svg(title: &str, y_label: &str, series: &[Series]) -> String {
    // Collect plottable values (positive net costs).
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    for s in series {
        for p in s.points.iter().filter(|p| p.n > 0) {
            for &c in &p.cpu_s {
                let net = c - s.baseline_s;
                if net > 0.0 {
                    xs.push(p.n as f64);
                    ys.push(net);
                }
            }
        }
    }
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"14\">{}</text>\n",
        WIDTH / 2.0,
        escape(title)
    );
    if xs.is_empty() {
        svg.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">no measurable costs to plot</text>\n</svg>\n",
            WIDTH / 2.0,
            HEIGHT / 2.0
        ));
        return svg;
    }
    let x_axis = LogAxis::covering(&xs, LEFT, WIDTH - RIGHT);
    let y_axis = LogAxis::covering(&ys, HEIGHT - BOTTOM, TOP);

    // Frame, ticks and grid.
    svg.push_str(&format!(
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n",
        WIDTH - LEFT - RIGHT,
        HEIGHT - TOP - BOTTOM
    ));
    for v in x_axis.ticks() {
        let x = x_axis.map(v);
        svg.push_str(&format!(
            "<line x1=\"{x:.1}\" y1=\"{TOP}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#eee\"/>\n\
             <text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
            HEIGHT - BOTTOM,
            HEIGHT - BOTTOM + 16.0,
            short_number(v)
        ));
    }
    for v in y_axis.ticks() {
        let y = y_axis.map(v);
        svg.push_str(&format!(
            "<line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#eee\"/>\n\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            WIDTH - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            escape(&format::seconds(v))
        ));
    }
    svg.push_str(&format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">n (log scale)</text>\n\
         <text x=\"16\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {})\">{} (log scale)</text>\n",
        (LEFT + WIDTH - RIGHT) / 2.0,
        HEIGHT - 16.0,
        HEIGHT / 2.0,
        HEIGHT / 2.0,
        escape(y_label)
    ));

    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut medians = Vec::new();
        for p in s.points.iter().filter(|p| p.n > 0) {
            for &c in &p.cpu_s {
                let net = c - s.baseline_s;
                if net > 0.0 {
                    svg.push_str(&format!(
                        "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2\" fill=\"{color}\" fill-opacity=\"0.45\"/>\n",
                        x_axis.map(p.n as f64),
                        y_axis.map(net)
                    ));
                }
            }
            let m = median(&p.cpu_s) - s.baseline_s;
            if m > 0.0 {
                medians.push((p.n as f64, m));
                svg.push_str(&format!(
                    "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"8\" height=\"8\" fill=\"{color}\"><title>n={} median {}</title></rect>\n",
                    x_axis.map(p.n as f64) - 4.0,
                    y_axis.map(m) - 4.0,
                    p.n,
                    escape(&format::seconds(m))
                ));
            }
        }
        if let (Some(k), true) = (s.exponent, medians.len() >= 2) {
            // The least-squares line passes through the mean of the logs.
            let top = &medians[medians.len().saturating_sub(3)..];
            let mx = top.iter().map(|(x, _)| x.ln()).sum::<f64>() / top.len() as f64;
            let my = top.iter().map(|(_, y)| y.ln()).sum::<f64>() / top.len() as f64;
            let at = |x: f64| (my + k * (x.ln() - mx)).exp();
            let (x0, x1) = (top[0].0, top[top.len() - 1].0);
            svg.push_str(&format!(
                "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{color}\" stroke-width=\"2\" stroke-dasharray=\"6 3\"/>\n",
                x_axis.map(x0),
                y_axis.map(at(x0).clamp(y_axis.lo, y_axis.hi)),
                x_axis.map(x1),
                y_axis.map(at(x1).clamp(y_axis.lo, y_axis.hi))
            ));
        }
        let legend = match s.exponent {
            Some(k) => format!("{} (≈N^{k:.2})", s.label),
            None => s.label.clone(),
        };
        let ly = TOP + 16.0 + 16.0 * i as f64;
        svg.push_str(&format!(
            "<rect x=\"{}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{color}\"/>\n\
             <text x=\"{}\" y=\"{:.1}\">{}</text>\n",
            LEFT + 10.0,
            ly - 9.0,
            LEFT + 26.0,
            ly,
            escape(&legend)
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

/// A logarithmic axis from `lo` to `hi` (values) onto pixels `from`..`to`.
struct LogAxis {
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
}

impl LogAxis {
    /// An axis covering the values with a little margin on each side.
    fn covering(values: &[f64], from: f64, to: f64) -> Self {
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (mut lo, mut hi) = (min / 1.3, max * 1.3);
        if hi / lo < 10.0 {
            let mid = (lo * hi).sqrt();
            lo = mid / 10f64.sqrt();
            hi = mid * 10f64.sqrt();
        }
        LogAxis { lo, hi, from, to }
    }

    fn map(&self, v: f64) -> f64 {
        let t = (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln());
        self.from + t * (self.to - self.from)
    }

    /// Tick values 1, 2, 5 × powers of ten inside the axis (only powers of
    /// ten when the axis spans more than three decades).
    fn ticks(&self) -> Vec<f64> {
        let decades = (self.hi / self.lo).log10();
        let steps: &[f64] = if decades > 3.0 {
            &[1.0]
        } else {
            &[1.0, 2.0, 5.0]
        };
        let mut out = Vec::new();
        let mut p = 10f64.powf(self.lo.log10().floor());
        while p <= self.hi {
            for s in steps {
                let v = p * s;
                if v >= self.lo && v <= self.hi {
                    out.push(v);
                }
            }
            p *= 10.0;
        }
        out
    }
}

fn short_number(v: f64) -> String {
    if v >= 1e6 && (v / 1e6).fract() == 0.0 {
        format!("{}M", v / 1e6)
    } else if v >= 1e3 && (v / 1e3).fract() == 0.0 {
        format!("{}k", v / 1e3)
    } else if v >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// Escapes text for SVG/XML content and attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points() -> Vec<Point> {
        [1000u64, 2000, 4000]
            .iter()
            .map(|&n| {
                let t = 1e-8 * (n * n) as f64 + 0.01;
                Point {
                    n,
                    cpu_s: vec![t * 0.95, t, t * 1.05],
                    wall_s: vec![t; 3],
                }
            })
            .collect()
    }

    #[test]
    fn draws_every_run_the_medians_and_the_fit() {
        let pts = points();
        let svg = series_svg(
            "quadratic <&>",
            "CPU",
            &[Series {
                label: "work {n}".into(),
                points: &pts,
                baseline_s: 0.01,
                exponent: Some(2.0),
            }],
        );
        assert_eq!(svg.matches("<circle").count(), 9);
        assert_eq!(svg.matches("<title>n=").count(), 3);
        assert!(svg.contains("stroke-dasharray"));
        assert!(svg.contains("quadratic &lt;&amp;&gt;"));
        assert!(!svg.contains("<&>"));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn nothing_measurable_still_gives_a_valid_page() {
        let pts = vec![Point {
            n: 10,
            cpu_s: vec![0.001],
            wall_s: vec![0.001],
        }];
        let svg = series_svg(
            "t",
            "CPU",
            &[Series {
                label: "x".into(),
                points: &pts,
                baseline_s: 0.01,
                exponent: None,
            }],
        );
        assert!(svg.contains("no measurable costs"));
    }

    #[test]
    fn ticks_are_round_numbers_inside_the_axis() {
        let axis = LogAxis::covering(&[1000.0, 64000.0], 0.0, 100.0);
        let ticks = axis.ticks();
        assert!(ticks.contains(&10000.0));
        assert!(ticks.iter().all(|&t| t >= axis.lo && t <= axis.hi));
    }
}
