//! The sprint as a picture: a timeline with one row per sister (one per
//! reviewer when the reviewer has several), a bar per run coloured by its outcome, the rounds
//! marked and the time axis labelled — what a person approving from a phone reads at a
//! glance. The layout is a pure function of the runs; drawing it is tiny-skia's, the
//! text ab_glyph's with the DejaVu Sans shipped in `assets/fonts` (no system font is read).

use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};
use tiny_skia::{Color, Paint, PathBuilder, Pixmap, Rect, Stroke, Transform};

use crate::domain::{Actor, Stage};
use crate::sister::RunOutcome;
use crate::store::{CheckRecord, Run, Sprint};

const FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

const WIDTH: f32 = 1200.0;
const LEFT: f32 = 250.0;
const RIGHT: f32 = 40.0;
const TOP: f32 = 96.0;
const ROW: f32 = 64.0;
const BAR: f32 = 38.0;
const AXIS: f32 = 64.0;
const LEGEND: f32 = 56.0;
/// A run too short to see still gets a bar this wide.
const MIN_BAR: f32 = 4.0;

/// How a run ended, as the picture colours it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Handed on: a plan, an implementation, an approval, a deploy; a passed check.
    Passed,
    /// Handed on, but asking for changes (a review's REQUEST_CHANGES).
    Changes,
    /// Failed: bad output, a non-zero exit, a timeout, a failed check.
    Failed,
    /// Stopped without a verdict: paused at a usage limit, interrupted, handed off, aborted.
    Stopped,
    /// Still running.
    Running,
}

impl Kind {
    const ALL: [Kind; 5] = [
        Kind::Passed,
        Kind::Changes,
        Kind::Failed,
        Kind::Stopped,
        Kind::Running,
    ];

    fn of(run: &Run) -> Kind {
        match run.outcome {
            None => Kind::Running,
            Some(RunOutcome::Handoff) => {
                let verdict = run.message.as_ref().and_then(|m| m["verdict"].as_str());
                match verdict {
                    Some("REQUEST_CHANGES") => Kind::Changes,
                    Some("ERROR" | "DEPLOY_FAILED") => Kind::Failed,
                    _ => Kind::Passed,
                }
            }
            Some(
                RunOutcome::Paused
                | RunOutcome::Interrupted
                | RunOutcome::HandedOff
                | RunOutcome::Cancelled,
            ) => Kind::Stopped,
            Some(_) => Kind::Failed,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Passed => "passed",
            Kind::Changes => "changes asked",
            Kind::Failed => "failed",
            Kind::Stopped => "stopped",
            Kind::Running => "running",
        }
    }

    fn color(self) -> Color {
        let (r, g, b) = match self {
            Kind::Passed => (46, 158, 79),
            Kind::Changes => (230, 162, 0),
            Kind::Failed => (210, 48, 48),
            Kind::Stopped => (140, 140, 150),
            Kind::Running => (52, 120, 220),
        };
        Color::from_rgba8(r, g, b, 255)
    }
}

/// A run's bar: its row, where it starts and ends on the picture, how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub row: usize,
    pub x0: f32,
    pub x1: f32,
    pub kind: Kind,
    /// When the run started (unix ms), for ordering.
    pub started_at: i64,
}

/// Where everything goes, before any pixel is drawn.
#[derive(Debug, Clone)]
pub struct Layout {
    pub width: u32,
    pub height: u32,
    pub title: String,
    /// Row labels, top to bottom.
    pub rows: Vec<String>,
    pub bars: Vec<Bar>,
    /// A line at the start of each round after the first: `(x, label)`.
    pub rounds: Vec<(f32, String)>,
    /// The time axis: `(x, label)`, from the sprint's start.
    pub ticks: Vec<(f32, String)>,
}

/// The rows: the sisters in pipeline order, the reviewer's parallel reviewers each on its own, and the
/// project's check between implementation and review when it ran.
fn rows(runs: &[Run], checks: &[CheckRecord]) -> Vec<(Actor, Option<String>, String)> {
    let mut rows = Vec::new();
    for actor in Actor::ALL {
        if actor.stage() == Stage::Reviewing {
            if !checks.is_empty() {
                rows.push((
                    Stage::Implementing.actor(),
                    Some(String::new()),
                    "check".to_string(),
                ));
            }
            let mut reviewers: Vec<&str> = runs
                .iter()
                .filter(|r| r.actor.stage() == Stage::Reviewing)
                .filter_map(|r| r.reviewer.as_deref())
                .collect();
            reviewers.sort_unstable();
            reviewers.dedup();
            if reviewers.len() > 1 {
                for name in reviewers {
                    rows.push((actor, Some(name.to_string()), format!("{actor} · {name}")));
                }
                continue;
            }
        }
        rows.push((actor, None, actor.to_string()));
    }
    rows
}

/// Time-axis steps, in seconds: the smallest that gives at most eight ticks is used.
const STEPS: [i64; 16] = [
    1, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14_400, 28_800, 43_200, 86_400,
];

fn tick_label(secs: i64) -> String {
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, m, s) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, 0, _) => format!("{h}h"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

/// The picture's layout for `sprint`'s runs and checks, with running runs ending at `now`.
pub fn layout(sprint: &Sprint, runs: &[Run], checks: &[CheckRecord], now: i64) -> Layout {
    let rows = rows(runs, checks);
    let end_of = |r: &Run| r.ended_at.unwrap_or(now).max(r.started_at);
    let start = runs
        .iter()
        .map(|r| r.started_at)
        .chain(checks.iter().map(|c| c.at - c.duration_ms.max(0)))
        .min()
        .unwrap_or(sprint.created_at);
    let end = runs
        .iter()
        .map(end_of)
        .chain(checks.iter().map(|c| c.at))
        .max()
        .unwrap_or(start)
        .max(start + 1000);
    let span = (end - start) as f32;
    let plot = WIDTH - LEFT - RIGHT;
    let x = |t: i64| LEFT + plot * ((t - start) as f32 / span).clamp(0.0, 1.0);
    let row_of = |run: &Run| {
        rows.iter().position(|(actor, reviewer, _)| {
            *actor == run.actor
                && reviewer.as_deref() != Some("")
                && (reviewer.is_none() || reviewer.as_deref() == run.reviewer.as_deref())
        })
    };
    let check_row = rows.iter().position(|(_, r, _)| r.as_deref() == Some(""));
    let mut bars: Vec<Bar> = runs
        .iter()
        .filter_map(|run| {
            Some(Bar {
                row: row_of(run)?,
                x0: x(run.started_at),
                x1: x(end_of(run)).max(x(run.started_at) + MIN_BAR),
                kind: Kind::of(run),
                started_at: run.started_at,
            })
        })
        .chain(checks.iter().filter_map(|c| {
            let from = c.at - c.duration_ms.max(0);
            Some(Bar {
                row: check_row?,
                x0: x(from),
                x1: x(c.at).max(x(from) + MIN_BAR),
                kind: if c.passed() {
                    Kind::Passed
                } else {
                    Kind::Failed
                },
                started_at: from,
            })
        }))
        .collect();
    bars.sort_by_key(|b| (b.row, b.started_at));
    let mut rounds = Vec::new();
    let last_round = runs.iter().map(|r| r.round).max().unwrap_or(1);
    for round in 2..=last_round {
        if let Some(first) = runs
            .iter()
            .filter(|r| r.round == round)
            .map(|r| r.started_at)
            .min()
        {
            rounds.push((x(first), format!("round {round}")));
        }
    }
    let secs = (end - start) / 1000;
    let step = STEPS
        .iter()
        .copied()
        .find(|s| secs / s <= 8)
        .unwrap_or(86_400 * ((secs / 86_400 / 8) + 1));
    let ticks = (0..=secs / step)
        .map(|i| (x(start + i * step * 1000), tick_label(i * step)))
        .collect();
    let height = TOP + ROW * rows.len() as f32 + AXIS + LEGEND;
    Layout {
        width: WIDTH as u32,
        height: height as u32,
        title: format!(
            "{} · {} · round {}",
            sprint.id,
            sprint.state.as_str(),
            sprint.round
        ),
        rows: rows.into_iter().map(|(_, _, label)| label).collect(),
        bars,
        rounds,
        ticks,
    }
}

/// The row's top edge.
fn row_top(row: usize) -> f32 {
    TOP + ROW * row as f32
}

/// Text drawn with the shipped font.
struct Pen<'a> {
    font: FontRef<'a>,
}

impl Pen<'_> {
    fn width(&self, text: &str, size: f32) -> f32 {
        let font = self.font.as_scaled(PxScale::from(size));
        text.chars().map(|c| font.h_advance(font.glyph_id(c))).sum()
    }

    /// `text` with its baseline at `y`, starting at `x`, in `color`.
    fn draw(&self, pixmap: &mut Pixmap, text: &str, x: f32, y: f32, size: f32, color: Color) {
        let scale = PxScale::from(size);
        let font = self.font.as_scaled(scale);
        let (w, h) = (pixmap.width() as i32, pixmap.height() as i32);
        let rgba = color.to_color_u8();
        let mut caret = x;
        for c in text.chars() {
            let id = font.glyph_id(c);
            let glyph = id.with_scale_and_position(scale, point(caret, y));
            caret += font.h_advance(id);
            let Some(outline) = self.font.outline_glyph(glyph) else {
                continue;
            };
            let bounds = outline.px_bounds();
            let pixels = pixmap.pixels_mut();
            outline.draw(|gx, gy, coverage| {
                let px = bounds.min.x as i32 + gx as i32;
                let py = bounds.min.y as i32 + gy as i32;
                if px < 0 || py < 0 || px >= w || py >= h {
                    return;
                }
                let i = (py * w + px) as usize;
                let under = pixels[i].demultiply();
                let mix = |a: u8, b: u8| {
                    (f32::from(a) * coverage + f32::from(b) * (1.0 - coverage)).round() as u8
                };
                pixels[i] = tiny_skia::ColorU8::from_rgba(
                    mix(rgba.red(), under.red()),
                    mix(rgba.green(), under.green()),
                    mix(rgba.blue(), under.blue()),
                    255,
                )
                .premultiply();
            });
        }
    }
}

fn fill(pixmap: &mut Pixmap, x: f32, y: f32, w: f32, h: f32, color: Color) {
    if let Some(rect) = Rect::from_xywh(x, y, w.max(1.0), h.max(1.0)) {
        let mut paint = Paint::default();
        paint.set_color(color);
        pixmap.fill_rect(rect, &paint, Transform::identity(), None);
    }
}

fn line(pixmap: &mut Pixmap, from: (f32, f32), to: (f32, f32), width: f32, color: Color) {
    let mut path = PathBuilder::new();
    path.move_to(from.0, from.1);
    path.line_to(to.0, to.1);
    let Some(path) = path.finish() else { return };
    let mut paint = Paint::default();
    paint.set_color(color);
    let stroke = Stroke {
        width,
        ..Stroke::default()
    };
    pixmap.stroke_path(&path, &paint, &stroke, Transform::identity(), None);
}

/// The layout drawn, as PNG bytes.
pub fn render(layout: &Layout) -> Result<Vec<u8>, String> {
    let font = FontRef::try_from_slice(FONT).map_err(|e| format!("the shipped font: {e}"))?;
    let pen = Pen { font };
    let mut pixmap = Pixmap::new(layout.width, layout.height)
        .ok_or_else(|| format!("no picture of {}×{}", layout.width, layout.height))?;
    pixmap.fill(Color::WHITE);
    let ink = Color::from_rgba8(30, 30, 36, 255);
    let faint = Color::from_rgba8(225, 225, 232, 255);
    let plot_bottom = row_top(layout.rows.len());
    pen.draw(&mut pixmap, &layout.title, 24.0, 52.0, 32.0, ink);
    for (i, label) in layout.rows.iter().enumerate() {
        let top = row_top(i);
        if i % 2 == 0 {
            fill(
                &mut pixmap,
                0.0,
                top,
                WIDTH,
                ROW,
                Color::from_rgba8(246, 246, 250, 255),
            );
        }
        pen.draw(&mut pixmap, label, 24.0, top + ROW / 2.0 + 10.0, 26.0, ink);
    }
    for (x, label) in &layout.ticks {
        line(&mut pixmap, (*x, TOP), (*x, plot_bottom), 1.0, faint);
        line(
            &mut pixmap,
            (*x, plot_bottom),
            (*x, plot_bottom + 8.0),
            2.0,
            ink,
        );
        let w = pen.width(label, 22.0);
        pen.draw(
            &mut pixmap,
            label,
            x - w / 2.0,
            plot_bottom + 34.0,
            22.0,
            ink,
        );
    }
    line(
        &mut pixmap,
        (LEFT, plot_bottom),
        (WIDTH - RIGHT, plot_bottom),
        2.0,
        ink,
    );
    for bar in &layout.bars {
        let top = row_top(bar.row) + (ROW - BAR) / 2.0;
        fill(
            &mut pixmap,
            bar.x0,
            top,
            bar.x1 - bar.x0,
            BAR,
            bar.kind.color(),
        );
    }
    let marker = Color::from_rgba8(90, 60, 160, 255);
    for (x, label) in &layout.rounds {
        line(&mut pixmap, (*x, TOP - 8.0), (*x, plot_bottom), 3.0, marker);
        pen.draw(&mut pixmap, label, x + 6.0, TOP - 12.0, 22.0, marker);
    }
    let mut x = 24.0;
    let y = plot_bottom + AXIS + 20.0;
    for kind in Kind::ALL {
        fill(&mut pixmap, x, y - 18.0, 22.0, 22.0, kind.color());
        pen.draw(&mut pixmap, kind.name(), x + 30.0, y, 22.0, ink);
        x += 30.0 + pen.width(kind.name(), 22.0) + 36.0;
    }
    pixmap.encode_png().map_err(|e| format!("the picture: {e}"))
}

/// The sprint's picture as PNG bytes.
pub fn picture(
    sprint: &Sprint,
    runs: &[Run],
    checks: &[CheckRecord],
    now: i64,
) -> Result<Vec<u8>, String> {
    render(&layout(sprint, runs, checks, now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::State;

    const PLANNER: crate::domain::Actor = Stage::Planning.actor();
    const IMPLEMENTER: crate::domain::Actor = Stage::Implementing.actor();
    const REVIEWER: crate::domain::Actor = Stage::Reviewing.actor();

    fn sprint() -> Sprint {
        Sprint {
            id: "SPRINT-001".into(),
            number: 1,
            project: "app".into(),
            goal: "Add a login page".into(),
            state: State::Done,
            round: 2,
            attempt: 1,
            resume: None,
            contract_id: "C-1".into(),
            branch: "feature/sprint-001".into(),
            next_run_at: None,
            focus: None,
            budget_usd: None,
            last_seq: 0,
            created_at: 0,
            updated_at: 0,
            host: None,
            epoch: 0,
            started_by: None,
            focus_by: None,
            base_branch: None,
            base_commit: None,
        }
    }

    /// A run of `actor` from `from` to `to` seconds, ended as `outcome` (with `verdict`).
    fn run(
        actor: Actor,
        reviewer: Option<&str>,
        round: u32,
        (from, to): (i64, i64),
        outcome: Option<RunOutcome>,
        verdict: &str,
    ) -> Run {
        let mut run = Run::sample(actor, reviewer, from, round, from * 1000);
        run.outcome = outcome;
        run.ended_at = outcome.map(|_| to * 1000);
        run.message = Some(serde_json::json!({ "verdict": verdict }));
        run
    }

    fn two_rounds() -> Vec<Run> {
        use RunOutcome::*;
        vec![
            run(PLANNER, None, 1, (0, 60), Some(Handoff), "PLAN_READY"),
            run(IMPLEMENTER, None, 1, (60, 100), Some(ExitNonzero), ""),
            run(IMPLEMENTER, None, 1, (110, 300), Some(Handoff), "IMPL_DONE"),
            run(
                REVIEWER,
                None,
                1,
                (300, 400),
                Some(Handoff),
                "REQUEST_CHANGES",
            ),
            run(IMPLEMENTER, None, 2, (400, 500), Some(Handoff), "IMPL_DONE"),
            run(REVIEWER, None, 2, (500, 540), None, ""),
        ]
    }

    #[test]
    fn one_row_per_sister_in_pipeline_order_bars_in_time_order() {
        let l = layout(&sprint(), &two_rounds(), &[], 600_000);
        assert_eq!(l.rows, ["harang", "narang", "darang", "erang"]);
        let narang: Vec<&Bar> = l.bars.iter().filter(|b| b.row == 1).collect();
        assert_eq!(narang.len(), 3);
        assert!(narang.windows(2).all(|w| w[0].x1 <= w[1].x0), "{narang:?}");
        assert!(
            l.bars
                .iter()
                .all(|b| b.x0 >= LEFT && b.x1 <= WIDTH - RIGHT + MIN_BAR)
        );
        let kinds: Vec<Kind> = l.bars.iter().map(|b| b.kind).collect();
        assert_eq!(
            kinds,
            [
                Kind::Passed,
                Kind::Failed,
                Kind::Passed,
                Kind::Passed,
                Kind::Changes,
                Kind::Running
            ]
        );
        // The running review ends where the picture does: now.
        assert_eq!(l.bars[5].x1, WIDTH - RIGHT);
    }

    #[test]
    fn rounds_are_marked_and_the_axis_is_labelled() {
        let l = layout(&sprint(), &two_rounds(), &[], 540_000);
        assert_eq!(l.rounds.len(), 1);
        let narang_round_2 = l
            .bars
            .iter()
            .find(|b| b.row == 1 && b.started_at == 400_000);
        assert_eq!(l.rounds[0].0, narang_round_2.map_or(0.0, |b| b.x0));
        assert_eq!(l.rounds[0].1, "round 2");
        let labels: Vec<&str> = l.ticks.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(labels, ["0s", "2m", "4m", "6m", "8m"]);
        assert!(l.ticks.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn several_reviewers_get_a_row_each_and_the_check_its_own() {
        use RunOutcome::*;
        let runs = vec![
            run(
                REVIEWER,
                Some("static"),
                1,
                (0, 10),
                Some(Handoff),
                "APPROVE",
            ),
            run(
                REVIEWER,
                Some("runtime"),
                1,
                (0, 20),
                Some(Handoff),
                "APPROVE",
            ),
        ];
        let check = CheckRecord {
            run_id: "SPRINT-001-R01".into(),
            command: vec!["make".into(), "test".into()],
            head: None,
            exit_code: Some(1),
            duration_ms: 5000,
            output_tail: String::new(),
            at: 5000,
            at_base: false,
        };
        let l = layout(&sprint(), &runs, &[check], 20_000);
        assert_eq!(
            l.rows,
            [
                "harang",
                "narang",
                "check",
                "darang · runtime",
                "darang · static",
                "erang"
            ]
        );
        let rows: Vec<(usize, Kind)> = l.bars.iter().map(|b| (b.row, b.kind)).collect();
        assert_eq!(
            rows,
            [(2, Kind::Failed), (3, Kind::Passed), (4, Kind::Passed)]
        );
    }

    #[test]
    fn the_picture_is_a_png_of_the_layouts_size() {
        let l = layout(&sprint(), &two_rounds(), &[], 600_000);
        let png = render(&l).expect("drawn");
        let pixmap = Pixmap::decode_png(&png).expect("a PNG");
        assert_eq!((pixmap.width(), pixmap.height()), (l.width, l.height));
    }
}
