//! Bar charts drawn on the server as SVG: geometry computed here, drawn by a template, so
//! every label is escaped like the rest of the page and no script draws anything.

use askama::Template;

/// Width of every chart's coordinate space (it scales to its box).
const WIDTH: f64 = 600.0;
/// Height of a column chart's plot area, and of one row of a row chart.
const PLOT: f64 = 160.0;
const ROW: f64 = 34.0;
/// Room on the left of a row chart for its labels, and below a column chart for its days.
const LABEL_ROOM: f64 = 180.0;
const AXIS_ROOM: f64 = 30.0;
/// How near an edge a column's label is kept inside the chart.
const LABEL_EDGE: f64 = 60.0;
/// Room on the right of a row chart for the value.
const VALUE_ROOM: f64 = 170.0;

/// One value to draw: what it is called, its size, and how it is shown.
pub(crate) struct Point {
    pub label: String,
    pub value: u64,
    pub shown: String,
}

/// A chart ready to draw.
#[derive(Template)]
#[template(path = "chart.html")]
pub(crate) struct Chart {
    pub caption: String,
    pub height: f64,
    pub bars: Vec<Bar>,
    pub labels: Vec<Label>,
}

pub(crate) struct Bar {
    pub x: String,
    pub y: String,
    pub w: String,
    pub h: String,
    /// Shown on hover: the label and value.
    pub title: String,
}

pub(crate) struct Label {
    pub x: String,
    pub y: String,
    pub anchor: &'static str,
    pub text: String,
}

fn n(v: f64) -> String {
    format!("{v:.1}")
}

/// Scales `value` to `room`, so the largest fills it (a non-zero value stays visible).
fn scaled(value: u64, max: u64, room: f64) -> f64 {
    if max == 0 || value == 0 {
        return 0.0;
    }
    (value as f64 / max as f64 * room).max(1.0)
}

impl Chart {
    /// Vertical bars side by side (days), a label under every `every`-th.
    pub fn columns(caption: impl Into<String>, points: &[Point], every: usize) -> Chart {
        let max = points.iter().map(|p| p.value).max().unwrap_or(0);
        let slot = WIDTH / points.len().max(1) as f64;
        let mut bars = Vec::new();
        let mut labels = Vec::new();
        for (i, p) in points.iter().enumerate() {
            let h = scaled(p.value, max, PLOT);
            let x = i as f64 * slot;
            bars.push(Bar {
                x: n(x + slot * 0.1),
                y: n(PLOT - h),
                w: n(slot * 0.8),
                h: n(h),
                title: format!("{}: {}", p.label, p.shown),
            });
            // Every `every`-th day is named, the edges' names kept inside the chart.
            if every > 0 && i % every == 0 {
                let middle = x + slot / 2.0;
                let (x, anchor) = if middle < LABEL_EDGE {
                    (x, "start")
                } else if middle > WIDTH - LABEL_EDGE {
                    (x + slot, "end")
                } else {
                    (middle, "middle")
                };
                labels.push(Label {
                    x: n(x),
                    y: n(PLOT + 24.0),
                    anchor,
                    text: p.label.clone(),
                });
            }
        }
        Chart {
            caption: caption.into(),
            height: PLOT + AXIS_ROOM,
            bars,
            labels,
        }
    }

    /// Horizontal bars one under another (agents, providers), largest first.
    pub fn rows(caption: impl Into<String>, mut points: Vec<Point>) -> Chart {
        points.sort_by(|a, b| b.value.cmp(&a.value).then_with(|| a.label.cmp(&b.label)));
        let max = points.iter().map(|p| p.value).max().unwrap_or(0);
        let room = WIDTH - LABEL_ROOM - VALUE_ROOM;
        let mut bars = Vec::new();
        let mut labels = Vec::new();
        for (i, p) in points.iter().enumerate() {
            let y = i as f64 * ROW;
            let w = scaled(p.value, max, room);
            bars.push(Bar {
                x: n(LABEL_ROOM),
                y: n(y + 4.0),
                w: n(w),
                h: n(ROW - 8.0),
                title: format!("{}: {}", p.label, p.shown),
            });
            labels.push(Label {
                x: n(LABEL_ROOM - 6.0),
                y: n(y + ROW * 0.68),
                anchor: "end",
                text: clip(&p.label, 14),
            });
            labels.push(Label {
                x: n(LABEL_ROOM + w + 6.0),
                y: n(y + ROW * 0.68),
                anchor: "start",
                text: p.shown.clone(),
            });
        }
        Chart {
            caption: caption.into(),
            height: (points.len().max(1) as f64) * ROW,
            bars,
            labels,
        }
    }

    pub fn width(&self) -> f64 {
        WIDTH
    }

    pub fn is_empty(&self) -> bool {
        self.bars.is_empty()
    }
}

/// At most `max` characters of `text`, with `…` when cut.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max - 1).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(label: &str, value: u64) -> Point {
        Point {
            label: label.to_owned(),
            value,
            shown: value.to_string(),
        }
    }

    #[test]
    fn the_largest_bar_fills_the_room_and_the_rest_scale_with_it() {
        let chart = Chart::rows("c", vec![point("a", 50), point("b", 100), point("z", 0)]);
        let widths: Vec<&str> = chart.bars.iter().map(|b| b.w.as_str()).collect();
        assert_eq!(widths, ["250.0", "125.0", "0.0"], "sorted largest first");
        assert_eq!(chart.bars[0].title, "b: 100");
        let cols = Chart::columns("c", &[point("d1", 1), point("d2", 1000)], 1);
        assert_eq!(
            cols.bars[0].h, "1.0",
            "a small non-zero value stays visible"
        );
        assert_eq!(cols.bars[1].h, "160.0");
        assert_eq!(cols.labels.len(), 2);
    }

    #[test]
    fn labels_are_escaped_when_drawn() {
        let chart = Chart::rows("<b>", vec![point("<script>alert(1)</script>", 1)]);
        let svg = chart.render().unwrap();
        assert!(!svg.contains("<script>"), "{svg}");
        assert!(svg.contains("&#60;script&#62;"), "{svg}");
    }
}
