//! Timelines as an SVG picture: the one people look at to judge overlap.
//!
//! Each timeline is a panel. A panel has one lane per stream (every copy and kernel of that
//! stream, coloured by kind), then one lane per engine: `H2D` copies, kernels, `D2H` copies of
//! all streams together, so that a glance tells whether both copy directions were busy at once.
//! Every bar is one operation as its events measured it, from the event before it to the event
//! after it (any wait for an engine included; nothing is inferred). Operations of one kind that
//! overlap in time, such as copies of one direction on a GPU with several copy engines, are
//! stacked in sub-lanes of their engine lane ([`Timeline::sub_lanes`]: each takes the lowest
//! sub-lane free at its start), and the lane grows by one row per sub-lane; each bar keeps its
//! stream's chunk label and its full width. All panels share one time axis, so a serial run
//! and a pipelined run compare by length; a dashed line marks the timeline's bound, when it has
//! one. Hovering a bar shows its details (an SVG `<title>`).

use cuda_rt_kernels::timeline::{Span, Stage, SubLanes, Timeline};
use std::fmt::Write as _;
use std::time::Duration;

const WIDTH: f64 = 1000.0;
const LABEL_WIDTH: f64 = 120.0;
const RIGHT_MARGIN: f64 = 40.0;
const LANE_HEIGHT: f64 = 18.0;
const LANE_GAP: f64 = 4.0;
/// Between the stacked sub-lanes of one engine lane.
const SUB_LANE_GAP: f64 = 2.0;
const GROUP_GAP: f64 = 10.0;
const HEADING_HEIGHT: f64 = 24.0;
const PANEL_GAP: f64 = 18.0;
const TOP: f64 = 58.0;
const AXIS_HEIGHT: f64 = 34.0;

fn colour(stage: Stage) -> &'static str {
    match stage {
        Stage::HostToDevice => "#4c78a8",
        Stage::Kernel => "#54a24b",
        Stage::DeviceToHost => "#f58518",
    }
}

/// Engine lane label of a stage.
fn engine_label(stage: Stage) -> &'static str {
    match stage {
        Stage::HostToDevice => "H2D copies",
        Stage::Kernel => "kernels",
        Stage::DeviceToHost => "D2H copies",
    }
}

/// `d` in milliseconds with a precision that suits `step` (the axis step, or the value itself).
fn format_ms(d: Duration, step: Duration) -> String {
    let decimals = match step.as_secs_f64() * 1e3 {
        s if s >= 1.0 => 0,
        s if s >= 0.1 => 1,
        s if s >= 0.01 => 2,
        _ => 3,
    };
    format!("{:.*} ms", decimals, d.as_secs_f64() * 1e3)
}

/// Escapes text for SVG element content and attribute values.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A step of 1, 2 or 5 times a power of ten that cuts `span` into about eight parts.
fn tick_step(span: Duration) -> Duration {
    let target = (span.as_secs_f64() / 8.0).max(1e-9);
    let magnitude = 10f64.powf(target.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= target)
        .unwrap_or(10.0 * magnitude);
    Duration::from_secs_f64(step)
}

/// How many rows the engine lane of `stage` has: one per sub-lane, at least one.
fn engine_rows(sub_lanes: &SubLanes, stage: Stage) -> usize {
    sub_lanes.count(stage).max(1)
}

/// The height of an engine lane of `rows` stacked sub-lanes.
fn engine_lane_height(rows: usize) -> f64 {
    rows as f64 * LANE_HEIGHT + rows.saturating_sub(1) as f64 * SUB_LANE_GAP
}

/// The height of one panel whose engine lanes are stacked as `sub_lanes` says.
fn panel_height(timeline: &Timeline, sub_lanes: &SubLanes) -> f64 {
    let engines: f64 = Stage::ALL
        .into_iter()
        .map(|stage| engine_lane_height(engine_rows(sub_lanes, stage)) + LANE_GAP)
        .sum();
    HEADING_HEIGHT + timeline.streams as f64 * (LANE_HEIGHT + LANE_GAP) + engines + GROUP_GAP
}

struct Scale {
    end: Duration,
}

impl Scale {
    fn x(&self, t: Duration) -> f64 {
        let plot = WIDTH - LABEL_WIDTH - RIGHT_MARGIN;
        LABEL_WIDTH + plot * (t.as_secs_f64() / self.end.as_secs_f64().max(1e-12))
    }
}

/// The picture of `timelines` (one panel each, top to bottom) as an SVG document.
pub fn render(title: &str, timelines: &[Timeline]) -> String {
    let end = timelines
        .iter()
        .map(|t| t.duration().max(t.bound.unwrap_or(Duration::ZERO)))
        .max()
        .unwrap_or(Duration::ZERO)
        .max(Duration::from_nanos(1));
    let step = tick_step(end);
    // Round the axis up to a whole step so the last tick closes the picture.
    let steps = (end.as_secs_f64() / step.as_secs_f64()).ceil().max(1.0);
    let scale = Scale {
        end: Duration::from_secs_f64(steps * step.as_secs_f64()),
    };
    let sub_lanes: Vec<SubLanes> = timelines.iter().map(Timeline::sub_lanes).collect();
    let plot_bottom = TOP
        + timelines
            .iter()
            .zip(&sub_lanes)
            .map(|(timeline, lanes)| panel_height(timeline, lanes))
            .sum::<f64>()
        + PANEL_GAP * timelines.len().saturating_sub(1) as f64;
    let height = plot_bottom + AXIS_HEIGHT;

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="Helvetica, Arial, sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="10" y="22" font-size="15" font-weight="bold">{}</text>"#,
        escape(title)
    );
    legend(&mut svg);
    grid(&mut svg, &scale, step, plot_bottom);

    let mut y = TOP;
    for (index, (timeline, lanes)) in timelines.iter().zip(&sub_lanes).enumerate() {
        panel(&mut svg, &scale, index, timeline, lanes, y);
        y += panel_height(timeline, lanes) + PANEL_GAP;
    }
    svg.push_str("</svg>\n");
    svg
}

/// Writes the picture of `timelines` to `path`.
///
/// # Errors
/// The file cannot be created or written.
pub fn write(path: &std::path::Path, title: &str, timelines: &[Timeline]) -> std::io::Result<()> {
    std::fs::write(path, render(title, timelines))
}

fn legend(svg: &mut String) {
    let mut x = 10.0;
    for stage in Stage::ALL {
        let _ = writeln!(
            svg,
            r#"<rect x="{x}" y="30" width="14" height="12" fill="{}"/><text x="{}" y="40">{}</text>"#,
            colour(stage),
            x + 18.0,
            stage.short_name()
        );
        x += 70.0;
    }
    let _ = writeln!(
        svg,
        r##"<text x="{x}" y="40" fill="#444">bars run event to event (waits included); overlaps stack in engine lanes</text>"##
    );
    x += 460.0;
    let _ = writeln!(
        svg,
        r##"<line x1="{x}" y1="36" x2="{}" y2="36" stroke="#c00" stroke-width="1.5" stroke-dasharray="5,3"/><text x="{}" y="40">bound</text>"##,
        x + 16.0,
        x + 20.0
    );
}

fn grid(svg: &mut String, scale: &Scale, step: Duration, plot_bottom: f64) {
    let _ = writeln!(svg, r##"<g class="axis" font-size="11" fill="#444">"##);
    let mut t = Duration::ZERO;
    while t <= scale.end + step / 1000 {
        let x = scale.x(t);
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{plot_bottom}" stroke="#ddd" stroke-width="1"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            plot_bottom + 16.0,
            format_ms(t, step)
        );
        t += step;
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">time since the first operation (CUDA events)</text>"#,
        LABEL_WIDTH + (WIDTH - LABEL_WIDTH - RIGHT_MARGIN) / 2.0,
        plot_bottom + 30.0
    );
    svg.push_str("</g>\n");
}

fn panel(
    svg: &mut String,
    scale: &Scale,
    index: usize,
    timeline: &Timeline,
    sub_lanes: &SubLanes,
    top: f64,
) {
    let duration = timeline.duration();
    let mut heading = format!("{}: {}", timeline.name, format_ms(duration, duration / 100));
    if let Some(bound) = timeline.bound {
        let _ = write!(heading, " (bound {})", format_ms(bound, bound / 100));
    }
    let _ = writeln!(
        svg,
        r#"<g class="timeline" data-index="{index}"><text x="10" y="{:.1}" font-weight="bold">{}</text>"#,
        top + 15.0,
        escape(&heading)
    );

    let mut y = top + HEADING_HEIGHT;
    for stream in 0..timeline.streams {
        lane_background(svg, &[y], &format!("stream {stream}"));
        let _ = writeln!(svg, r#"<g class="lane stream" data-stream="{stream}">"#);
        for span in timeline.spans.iter().filter(|s| s.stream == stream) {
            bar(svg, scale, span, y, None);
        }
        svg.push_str("</g>\n");
        y += LANE_HEIGHT + LANE_GAP;
    }
    y += GROUP_GAP / 2.0;
    for stage in Stage::ALL {
        let rows = engine_rows(sub_lanes, stage);
        let height = engine_lane_height(rows);
        let row_tops: Vec<f64> = (0..rows)
            .map(|row| y + row as f64 * (LANE_HEIGHT + SUB_LANE_GAP))
            .collect();
        lane_background(svg, &row_tops, engine_label(stage));
        let _ = writeln!(
            svg,
            r#"<g class="lane engine" data-stage="{}" data-sub-lanes="{rows}">"#,
            stage.short_name()
        );
        for (span, &row) in timeline.spans.iter().zip(&sub_lanes.of_span) {
            if span.stage == stage {
                bar(svg, scale, span, row_tops[row], Some(row));
            }
        }
        svg.push_str("</g>\n");
        y += height + LANE_GAP;
    }
    if let Some(bound) = timeline.bound {
        let x = scale.x(bound);
        let _ = writeln!(
            svg,
            r##"<line class="bound" x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{y:.1}" stroke="#c00" stroke-width="1.5" stroke-dasharray="5,3"><title>bound: {}</title></line>"##,
            top + HEADING_HEIGHT - 2.0,
            format_ms(bound, bound / 100)
        );
    }
    svg.push_str("</g>\n");
}

/// A lane's label, vertically centred on its rows, and the background of each row (`row_tops`:
/// the top of each, in order).
fn lane_background(svg: &mut String, row_tops: &[f64], label: &str) {
    let (first, last) = (row_tops[0], row_tops[row_tops.len() - 1]);
    let _ = writeln!(
        svg,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#333">{}</text>"##,
        LABEL_WIDTH - 8.0,
        (first + last + LANE_HEIGHT) / 2.0 + 4.0,
        escape(label),
    );
    for y in row_tops {
        let _ = writeln!(
            svg,
            r##"<rect x="{LABEL_WIDTH}" y="{y:.1}" width="{:.1}" height="{LANE_HEIGHT}" fill="#f4f4f4"/>"##,
            WIDTH - LABEL_WIDTH - RIGHT_MARGIN
        );
    }
}

/// One span from its start to its end as measured, at the top `y` of its row, with a tooltip
/// and, when wide enough, the chunk number. `sub_lane` is its row in an engine lane (none in a
/// stream lane).
fn bar(svg: &mut String, scale: &Scale, span: &Span, y: f64, sub_lane: Option<usize>) {
    let fill = colour(span.stage);
    let duration = span.duration();
    let mut tooltip = format!(
        "stream {} · {} chunk {} · {:.2} MiB · {}",
        span.stream,
        span.stage.short_name(),
        span.chunk,
        span.bytes as f64 / (1u64 << 20) as f64,
        format_ms(duration, Duration::from_micros(1)),
    );
    if !duration.is_zero() && span.bytes > 0 {
        let _ = write!(
            tooltip,
            " · {:.1} GB/s",
            span.bytes as f64 / duration.as_secs_f64() / 1e9
        );
    }
    let sub_lane = sub_lane.map_or(String::new(), |row| format!(r#" data-sub-lane="{row}""#));
    let (x0, x1) = (scale.x(span.start), scale.x(span.end));
    let width = (x1 - x0).max(0.5);
    let _ = writeln!(
        svg,
        r#"<rect class="op {}"{sub_lane} x="{x0:.2}" y="{y:.1}" width="{width:.2}" height="{LANE_HEIGHT}" fill="{fill}" stroke="white" stroke-width="0.5"><title>{}</title></rect>"#,
        span.stage.short_name(),
        escape(&tooltip)
    );
    let label = span.chunk.to_string();
    if width >= 7.0 * label.len() as f64 + 4.0 {
        let _ = writeln!(
            svg,
            r#"<text x="{:.2}" y="{:.1}" text-anchor="middle" font-size="10" fill="white">{label}</text>"#,
            x0 + width / 2.0,
            y + LANE_HEIGHT - 5.0
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(
            tick_step(Duration::from_millis(10)),
            Duration::from_secs_f64(0.002)
        );
        assert_eq!(
            tick_step(Duration::from_millis(6)),
            Duration::from_secs_f64(0.001)
        );
        assert_eq!(
            format_ms(Duration::from_micros(5760), Duration::from_micros(57)),
            "5.76 ms"
        );
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
