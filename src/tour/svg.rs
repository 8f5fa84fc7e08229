//! Timelines as an SVG picture: the one people look at to judge overlap.
//!
//! Each timeline is a panel. A panel has one lane per stream (every copy and kernel of that
//! stream, coloured by kind), then one lane per engine: `H2D` copies, kernels, `D2H` copies of
//! all streams together, so that a glance tells whether both copy directions were busy at once.
//! All panels share one time axis, so a serial run and a pipelined run compare by length. The
//! lighter start of a bar is the time an operation was queued behind an earlier one of its kind
//! ([`Timeline::engine_starts`]); a dashed line marks the timeline's bound, when it has one.
//! Hovering a bar shows its details (an SVG `<title>`).

use cuda_rt_kernels::timeline::{Span, Stage, Timeline};
use std::fmt::Write as _;
use std::time::Duration;

const WIDTH: f64 = 1000.0;
const LABEL_WIDTH: f64 = 120.0;
const RIGHT_MARGIN: f64 = 40.0;
const LANE_HEIGHT: f64 = 18.0;
const LANE_GAP: f64 = 4.0;
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

/// The height of one panel.
fn panel_height(timeline: &Timeline) -> f64 {
    let lanes = timeline.streams as f64 + Stage::ALL.len() as f64;
    HEADING_HEIGHT + lanes * (LANE_HEIGHT + LANE_GAP) + GROUP_GAP
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
    let plot_bottom = TOP
        + timelines.iter().map(panel_height).sum::<f64>()
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
    for (index, timeline) in timelines.iter().enumerate() {
        panel(&mut svg, &scale, index, timeline, y);
        y += panel_height(timeline) + PANEL_GAP;
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
        r##"<rect x="{x}" y="30" width="14" height="12" fill="#888" fill-opacity="0.3"/><text x="{}" y="40">queued (lighter: waiting behind an earlier operation of its kind)</text>"##,
        x + 18.0
    );
    x += 400.0;
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

fn panel(svg: &mut String, scale: &Scale, index: usize, timeline: &Timeline, top: f64) {
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
    let engine_starts = timeline.engine_starts();
    let lane_top = |lane: usize| top + HEADING_HEIGHT + lane as f64 * (LANE_HEIGHT + LANE_GAP);

    for stream in 0..timeline.streams {
        let y = lane_top(stream);
        lane_background(svg, y, &format!("stream {stream}"));
        let _ = writeln!(svg, r#"<g class="lane stream" data-stream="{stream}">"#);
        for (span, &busy_from) in timeline.spans.iter().zip(&engine_starts) {
            if span.stream == stream {
                bar(svg, scale, span, busy_from, y, true);
            }
        }
        svg.push_str("</g>\n");
    }
    for (offset, stage) in Stage::ALL.into_iter().enumerate() {
        let y = lane_top(timeline.streams + offset) + GROUP_GAP / 2.0;
        lane_background(svg, y, engine_label(stage));
        let _ = writeln!(
            svg,
            r#"<g class="lane engine" data-stage="{}">"#,
            stage.short_name()
        );
        for (span, &busy_from) in timeline.spans.iter().zip(&engine_starts) {
            if span.stage == stage {
                bar(svg, scale, span, busy_from, y, false);
            }
        }
        svg.push_str("</g>\n");
    }
    if let Some(bound) = timeline.bound {
        let x = scale.x(bound);
        let bottom = lane_top(timeline.streams + Stage::ALL.len()) + GROUP_GAP / 2.0;
        let _ = writeln!(
            svg,
            r##"<line class="bound" x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#c00" stroke-width="1.5" stroke-dasharray="5,3"><title>bound: {}</title></line>"##,
            top + HEADING_HEIGHT - 2.0,
            format_ms(bound, bound / 100)
        );
    }
    svg.push_str("</g>\n");
}

fn lane_background(svg: &mut String, y: f64, label: &str) {
    let _ = writeln!(
        svg,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#333">{}</text><rect x="{LABEL_WIDTH}" y="{y:.1}" width="{:.1}" height="{LANE_HEIGHT}" fill="#f4f4f4"/>"##,
        LABEL_WIDTH - 8.0,
        y + LANE_HEIGHT - 5.0,
        escape(label),
        WIDTH - LABEL_WIDTH - RIGHT_MARGIN
    );
}

/// One span: its queued part (lighter, stream lanes only) and its busy part, with a tooltip
/// and, when wide enough, the chunk number.
fn bar(
    svg: &mut String,
    scale: &Scale,
    span: &Span,
    busy_from: Duration,
    y: f64,
    show_queued: bool,
) {
    let fill = colour(span.stage);
    let queued = busy_from.saturating_sub(span.start);
    let busy = span.end.saturating_sub(busy_from);
    let tooltip = format!(
        "stream {} · {} chunk {} · {:.2} MiB · {} busy{}",
        span.stream,
        span.stage.short_name(),
        span.chunk,
        span.bytes as f64 / (1u64 << 20) as f64,
        format_ms(busy, Duration::from_micros(1)),
        if queued.is_zero() {
            String::new()
        } else {
            format!(", {} queued", format_ms(queued, Duration::from_micros(1)))
        }
    );
    if show_queued && !queued.is_zero() {
        let (x0, x1) = (scale.x(span.start), scale.x(busy_from));
        let _ = writeln!(
            svg,
            r#"<rect class="queued" x="{x0:.2}" y="{y:.1}" width="{:.2}" height="{LANE_HEIGHT}" fill="{fill}" fill-opacity="0.25"><title>{}</title></rect>"#,
            (x1 - x0).max(0.0),
            escape(&tooltip)
        );
    }
    let (x0, x1) = (scale.x(busy_from), scale.x(span.end));
    let width = (x1 - x0).max(0.5);
    let _ = writeln!(
        svg,
        r#"<rect class="op {}" x="{x0:.2}" y="{y:.1}" width="{width:.2}" height="{LANE_HEIGHT}" fill="{fill}" stroke="white" stroke-width="0.5"><title>{}</title></rect>"#,
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
