//! Hand-written SVG line charts (latency CDFs, CPU per session against sessions): a few
//! series, linear or log-10 x axis, ticks, a legend. No dependencies, deterministic output.

use std::fmt::Write as _;

const W: f64 = 720.0;
const H: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

/// One line of a chart.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// Draw markers at the points (for sparse series).
    pub markers: bool,
    pub dashed: bool,
}

/// A chart description.
pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub log_x: bool,
    pub series: Vec<Series>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn nice_step(span: f64) -> f64 {
    let raw = span / 6.0;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let step = if norm < 1.5 {
        1.0
    } else if norm < 3.0 {
        2.0
    } else if norm < 7.0 {
        5.0
    } else {
        10.0
    };
    step * mag
}

fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// The plot area and the data range it shows.
struct Frame {
    log_x: bool,
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    /// Plot width and height, in pixels.
    pw: f64,
    ph: f64,
}

impl Frame {
    /// A range holding every point: y from zero (or below) with 5 % headroom; x from zero,
    /// or whole decades on a log axis.
    fn fit(pts: &[(f64, f64)], log_x: bool) -> Frame {
        let tx = |x: f64| if log_x { x.log10() } else { x };
        let (mut x0, mut x1) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), p| {
            (a.min(tx(p.0)), b.max(tx(p.0)))
        });
        let (mut y0, mut y1) = pts
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
        y0 = y0.min(0.0);
        if log_x {
            x0 = x0.floor();
            x1 = x1.ceil().max(x0 + 1.0);
        } else {
            x0 = x0.min(0.0);
            if x1 <= x0 {
                x1 = x0 + 1.0;
            }
        }
        if y1 <= y0 {
            y1 = y0 + 1.0;
        }
        y1 *= 1.05;
        Frame {
            log_x,
            x0,
            x1,
            y0,
            y1,
            pw: W - LEFT - RIGHT,
            ph: H - TOP - BOTTOM,
        }
    }

    fn tx(&self, x: f64) -> f64 {
        if self.log_x {
            x.log10()
        } else {
            x
        }
    }

    fn sx(&self, x: f64) -> f64 {
        LEFT + (self.tx(x) - self.x0) / (self.x1 - self.x0) * self.pw
    }

    fn sy(&self, y: f64) -> f64 {
        TOP + self.ph - (y - self.y0) / (self.y1 - self.y0) * self.ph
    }

    /// The plot's border, and a grid line with its label at each tick of both axes.
    fn grid(&self, svg: &mut String) {
        let (pw, ph) = (self.pw, self.ph);
        let _ = writeln!(
            svg,
            r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>"##
        );
        let ystep = nice_step(self.y1 - self.y0);
        let mut y = (self.y0 / ystep).ceil() * ystep;
        while y <= self.y1 {
            let py = self.sy(y);
            let _ = writeln!(
                svg,
                r##"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT + pw,
                LEFT - 6.0,
                py + 4.0,
                fmt_tick(y)
            );
            y += ystep;
        }
        let x_tick = |svg: &mut String, v: f64| {
            let px = self.sx(v);
            let _ = writeln!(
                svg,
                r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{:.1}" stroke="#ddd"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                TOP + ph,
                TOP + ph + 16.0,
                fmt_tick(v)
            );
        };
        if self.log_x {
            let mut e = self.x0;
            while e <= self.x1 + 1e-9 {
                x_tick(svg, 10f64.powf(e));
                e += 1.0;
            }
        } else {
            let xstep = nice_step(self.x1 - self.x0);
            let mut x = (self.x0 / xstep).ceil() * xstep;
            while x <= self.x1 + 1e-9 {
                x_tick(svg, x);
                x += xstep;
            }
        }
    }
}

impl Chart<'_> {
    /// Renders the chart; an empty chart says so.
    pub fn render(&self) -> String {
        let pts = self.series.iter().flat_map(|s| s.points.iter());
        let pts: Vec<(f64, f64)> = pts.copied().filter(|&p| self.plottable(p)).collect();
        let mut svg = String::new();
        let _ = writeln!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(svg, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"#,
            W / 2.0,
            esc(self.title)
        );
        if pts.is_empty() {
            let _ = writeln!(
                svg,
                r#"<text x="{}" y="{}" text-anchor="middle">no data in this run</text></svg>"#,
                W / 2.0,
                H / 2.0
            );
            return svg;
        }
        let frame = Frame::fit(&pts, self.log_x);
        frame.grid(&mut svg);
        let (pw, ph) = (frame.pw, frame.ph);
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LEFT + pw / 2.0,
            H - 18.0,
            esc(self.x_label)
        );
        let _ = writeln!(
            svg,
            r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">{}</text>"#,
            TOP + ph / 2.0,
            TOP + ph / 2.0,
            esc(self.y_label)
        );
        for (i, s) in self.series.iter().enumerate() {
            self.series_line(&mut svg, &frame, i, s);
        }
        svg.push_str("</svg>\n");
        svg
    }

    /// A finite point, and on a log axis one right of zero.
    fn plottable(&self, (x, y): (f64, f64)) -> bool {
        x.is_finite() && y.is_finite() && (!self.log_x || x > 0.0)
    }

    /// Series `i`: its line (and markers), and its entry in the legend.
    fn series_line(&self, svg: &mut String, frame: &Frame, i: usize, s: &Series) {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = s
            .points
            .iter()
            .filter(|&&p| self.plottable(p))
            .map(|&(x, y)| format!("{:.1},{:.1}", frame.sx(x), frame.sy(y)))
            .collect();
        if path.is_empty() {
            return;
        }
        let dash = if s.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{}"/>"#,
            path.join(" ")
        );
        if s.markers {
            for p in &path {
                let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
                let _ = writeln!(svg, r#"<circle cx="{x}" cy="{y}" r="3.5" fill="{color}"/>"#);
            }
        }
        let ly = TOP + 14.0 + 16.0 * i as f64;
        let lx = LEFT + 12.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="3"{dash}/><text x="{}" y="{}">{}</text>"#,
            lx + 22.0,
            lx + 28.0,
            ly + 4.0,
            esc(&s.label)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_is_well_formed_svg_with_its_series() {
        let c = Chart {
            title: "t <1>",
            x_label: "x",
            y_label: "y",
            log_x: true,
            series: vec![Series {
                label: "a".into(),
                points: vec![(1.0, 0.1), (10.0, 0.5), (1000.0, 1.0)],
                markers: true,
                dashed: false,
            }],
        };
        let s = c.render();
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert!(s.contains("polyline") && s.contains("t &lt;1&gt;"));
        assert_eq!(s.matches("<circle").count(), 3);
    }

    #[test]
    fn an_empty_chart_says_so() {
        let c = Chart {
            title: "t",
            x_label: "x",
            y_label: "y",
            log_x: false,
            series: vec![],
        };
        assert!(c.render().contains("no data"));
    }
}
