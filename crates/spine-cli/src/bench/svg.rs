//! A grouped bar chart as a standalone SVG: enough to see benchmark results in a browser
//! without any plotting tool.

use std::fmt::Write;

const COLOURS: [&str; 6] = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948"];

/// Bars of every series for each label; `log` draws the value axis in log10.
pub fn bars(title: &str, labels: &[&str], series: &[(&str, Vec<f64>)], log: bool) -> String {
    let (w, h, left, bottom, top) = (960.0, 420.0, 60.0, 90.0, 40.0);
    let plot_h = h - bottom - top;
    let max = series.iter().flat_map(|(_, v)| v.iter().copied()).fold(1.0, f64::max);
    let scale = |v: f64| -> f64 {
        if v <= 0.0 {
            return 0.0;
        }
        if log {
            (v.log10() + 1.0).max(0.0) / (max.log10() + 1.0) * plot_h
        } else {
            v / max * plot_h
        }
    };
    let group = (w - left - 20.0) / labels.len().max(1) as f64;
    let bar = group * 0.8 / series.len().max(1) as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(
        s,
        r#"<text x="{}" y="20" font-size="14" text-anchor="middle">{}</text>"#,
        w / 2.0,
        esc(title)
    );
    let axis_y = h - bottom;
    let _ = write!(
        s,
        r#"<line x1="{left}" y1="{axis_y}" x2="{}" y2="{axis_y}" stroke="black"/>"#,
        w - 10.0
    );
    for (gi, label) in labels.iter().enumerate() {
        let gx = left + gi as f64 * group + group * 0.1;
        for (si, (_, values)) in series.iter().enumerate() {
            let v = values.get(gi).copied().unwrap_or(0.0);
            let bh = scale(v);
            let x = gx + si as f64 * bar;
            let _ = write!(
                s,
                r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{bh:.1}" fill="{}"><title>{}: {v:.1}</title></rect>"#,
                axis_y - bh,
                bar * 0.95,
                COLOURS[si % COLOURS.len()],
                esc(label)
            );
        }
        let lx = gx + group * 0.4;
        let _ = write!(
            s,
            r#"<text x="{lx:.1}" y="{:.1}" transform="rotate(-35 {lx:.1} {:.1})" text-anchor="end">{}</text>"#,
            axis_y + 14.0,
            axis_y + 14.0,
            esc(label)
        );
    }
    for (si, (name, _)) in series.iter().enumerate() {
        let y = top + 14.0 * si as f64;
        let _ = write!(
            s,
            r#"<rect x="{}" y="{y}" width="10" height="10" fill="{}"/><text x="{}" y="{}">{}</text>"#,
            w - 160.0,
            COLOURS[si % COLOURS.len()],
            w - 145.0,
            y + 9.0,
            esc(name)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn esc(t: &str) -> String {
    t.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_bar_per_value_and_a_legend_entry_per_series() {
        let svg =
            super::bars("t", &["a", "b"], &[("x", vec![1.0, 10.0]), ("y", vec![100.0, 0.0])], true);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<rect").count(), 4 + 2, "4 bars + 2 legend swatches");
        assert!(svg.contains("<title>b: 10.0</title>"));
    }
}
