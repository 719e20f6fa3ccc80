//! The words the user reads, one line per transition, in the design's style:
//! Korean by default, English by config. The console and the Discord bridge both print
//! these lines; only the Discord bridge turns `mention` into a ping, and it makes the
//! sisters' words in them inert (`Context::agent_text`).

use crate::domain::short_commit;
use std::time::Duration;

use crate::config::{Config, Locale};
use crate::domain::Actor;
use crate::pipeline::fsm::{Escalation, Note};
use crate::pipeline::{Event, Stage, State};
use crate::store::{Sprint, TransitionRecord};

/// One line for one transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub text: String,
    /// The user is mentioned: only on escalation and when the sprint is done.
    pub mention: bool,
}

/// What a line needs to know about its sprint besides the transition.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub sprint_id: &'a str,
    pub branch: &'a str,
    pub locale: Locale,
    pub nickname: &'a str,
    pub max_attempts: u32,
    /// How the line puts words a sister wrote (a reason, an error, a branch it named): on
    /// one line (`one_line`) for a terminal, which escapes the whole line as it prints it;
    /// Discord's bridge also makes them inert for its Markdown (`discord::inert::line`).
    pub agent_text: fn(&str) -> String,
    /// How the line names a person (`discord:ID`, `cli:user@host`): as recorded for a
    /// terminal; Discord's bridge names a Discord user as a mention that pings no one.
    pub person: fn(&str) -> String,
}

impl<'a> Context<'a> {
    /// The context of one sprint's lines under this config.
    pub fn new(config: &'a Config, sprint: &'a Sprint) -> Context<'a> {
        Context {
            sprint_id: &sprint.id,
            branch: &sprint.branch,
            locale: config.pipeline.locale,
            nickname: config.nickname(),
            max_attempts: config.pipeline.max_attempts,
            agent_text: one_line,
            person: str::to_string,
        }
    }

    /// Words a sister wrote, as this line shows them.
    fn agent(&self, text: &str) -> String {
        (self.agent_text)(text)
    }
}

/// The stage as the lines name it (`기획`, `planning`): its sister's work.
pub fn stage_name(stage: Stage, locale: Locale) -> &'static str {
    locale.pick(stage.actor().info().work)
}

/// The sister as the lines name it (`하랑이`, `Harang`).
fn sister(actor: Actor, locale: Locale) -> &'static str {
    locale.pick(actor.info().names)
}

/// "15:00 UTC" (with the date when it is not today's, in UTC: "2026-12-02 15:00 UTC").
pub fn clock_time(at_ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(at_ms).unwrap_or(0));
    let stamp = humantime::format_rfc3339_seconds(at).to_string(); // 2026-12-01T15:00:00Z
    let now = std::time::UNIX_EPOCH
        + Duration::from_millis(u64::try_from(crate::clock::now_ms()).unwrap_or(0));
    let today = humantime::format_rfc3339_seconds(now).to_string();
    let (date, time) = (
        stamp.get(..10).unwrap_or(""),
        stamp.get(11..16).unwrap_or(""),
    );
    if today.get(..10) == Some(date) {
        format!("{time} UTC")
    } else {
        format!("{date} {time} UTC")
    }
}

/// "once", "twice", "3 times".
fn times(n: u32) -> String {
    match n {
        1 => "once".into(),
        2 => "twice".into(),
        n => format!("{n} times"),
    }
}

/// "10ms", "5s", "2m 30s": how long until the next try (whole seconds from one second up).
pub fn short_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        return format!("{}ms", d.as_millis());
    }
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

/// Renders the line for one transition.
pub fn render(t: &TransitionRecord, cx: &Context<'_>) -> Line {
    let l = cx.locale;
    let id = cx.sprint_id;
    let plain = |text: String| Line {
        text,
        mention: false,
    };
    if let Event::FellBack {
        agent,
        until_ms,
        next,
        ..
    } = &t.detail
    {
        let stage = t.to.stage().unwrap_or(Stage::Planning);
        let who = sister(stage.actor(), l);
        let (agent, next) = (crate::config::title(agent), crate::config::title(next));
        let when = clock_time(*until_ms);
        return plain(match l {
            Locale::Ko => format!("⏭️ {who}: {agent} 사용량 한도 ({when}까지), {next}(으)로 계속"),
            Locale::En => format!(
                "⏭️ {who}: {agent} is at its usage limit until {when}; continuing with {next}"
            ),
        });
    }
    if let Some(Note::Paused { resume_at_ms, .. }) = &t.note {
        let stage = t.to.stage().unwrap_or(Stage::Planning);
        let who = sister(stage.actor(), l);
        let when = clock_time(*resume_at_ms);
        return plain(match l {
            Locale::Ko => format!("⏸️ {who} 사용량 한도: {when}에 다시 시작"),
            Locale::En => format!("⏸️ {who} hit its usage limit: resumes at {when}"),
        });
    }
    if let Some(Note::Retry { failure, delay_ms }) = &t.note {
        let stage = t.to.stage().unwrap_or(Stage::Planning);
        // One of several reviewers retries alone, on its own count.
        let (who, previous) = match &t.detail {
            Event::ReviewerFailed {
                reviewer, attempt, ..
            } => (reviewer_name(reviewer, l), *attempt),
            _ => (
                sister(stage.actor(), l).to_string(),
                t.attempt.saturating_sub(1),
            ),
        };
        let wait = short_duration(Duration::from_millis(*delay_ms));
        let reason = cx.agent(&failure.detail);
        return plain(match l {
            Locale::Ko => format!(
                "⚠️ {who} 실패 (시도 {previous}/{}): {} — {reason}. {wait} 후 다시 시도",
                cx.max_attempts,
                failure.kind.as_str()
            ),
            Locale::En => format!(
                "⚠️ {who} failed (attempt {previous}/{}): {} — {reason}. Retrying in {wait}",
                cx.max_attempts,
                failure.kind.as_str()
            ),
        });
    }
    if let Some(Note::Escalated { escalation }) = &t.note {
        let (narang, darang) = (sister(Actor::Narang, l), sister(Actor::Darang, l));
        let what = match (escalation, l) {
            (
                Escalation::AttemptsExhausted {
                    stage,
                    attempts,
                    last,
                },
                Locale::Ko,
            ) => format!(
                "{} 단계 {attempts}회 실패 (마지막: {} — {})",
                stage_name(*stage, l),
                last.kind.as_str(),
                cx.agent(&last.detail)
            ),
            (
                Escalation::AttemptsExhausted {
                    stage,
                    attempts,
                    last,
                },
                Locale::En,
            ) => format!(
                "{} failed {} (last: {} — {})",
                stage_name(*stage, l),
                times(*attempts),
                last.kind.as_str(),
                cx.agent(&last.detail)
            ),
            (Escalation::ReviewRoundsExhausted { rounds }, Locale::Ko) => {
                format!("리뷰 라운드 {rounds}회 소진 ({darang}가 또 변경 요청)")
            }
            (Escalation::ReviewRoundsExhausted { rounds }, Locale::En) => {
                format!(
                    "review rounds exhausted after {rounds} round{} ({darang} asked for changes again)",
                    if *rounds == 1 { "" } else { "s" }
                )
            }
            (Escalation::DeployInterrupted { detail }, Locale::Ko) => {
                format!("배포 중 중단되어 결과를 알 수 없음 ({})", cx.agent(detail))
            }
            (Escalation::DeployInterrupted { detail }, Locale::En) => {
                format!(
                    "the deploy was interrupted and its outcome is unknown ({})",
                    cx.agent(detail)
                )
            }
            (
                Escalation::BudgetExceeded {
                    spent_usd,
                    limit_usd,
                },
                Locale::Ko,
            ) => {
                format!("예산 초과 (${spent_usd:.2} / 한도 ${limit_usd:.2})")
            }
            (
                Escalation::BudgetExceeded {
                    spent_usd,
                    limit_usd,
                },
                Locale::En,
            ) => {
                format!("over budget (${spent_usd:.2} of ${limit_usd:.2})")
            }
            (Escalation::NoProgress { round, head }, Locale::Ko) => format!(
                "라운드 {round}에서 바뀐 것 없음: head {}가 라운드 {}와 같음 ({narang}가 커밋 없이 IMPL_DONE)",
                short_commit(head),
                round.saturating_sub(1)
            ),
            (Escalation::NoProgress { round, head }, Locale::En) => format!(
                "round {round} changed nothing: head {} as in round {} ({narang} answered IMPL_DONE with no new commit)",
                short_commit(head),
                round.saturating_sub(1)
            ),
            (Escalation::SameFindings { round }, Locale::Ko) => format!(
                "라운드 {round} 리뷰 지적이 라운드 {}와 같음 ({darang}가 같은 변경 요청 반복)",
                round.saturating_sub(1)
            ),
            (Escalation::SameFindings { round }, Locale::En) => format!(
                "round {round}'s review findings are round {}'s again ({darang} repeated its request)",
                round.saturating_sub(1)
            ),
            (Escalation::ChecksTimedOut { pending }, Locale::Ko) => format!(
                "CI 검사가 ci_timeout 안에 끝나지 않음 (대기 중: {})",
                cx.agent(&pending.join(", "))
            ),
            (Escalation::ChecksTimedOut { pending }, Locale::En) => format!(
                "the forge's checks were still pending past ci_timeout ({})",
                cx.agent(&pending.join(", "))
            ),
            (Escalation::ForgeFailed { reason }, Locale::Ko) => {
                format!("포지가 거부함 — {}", cx.agent(reason))
            }
            (Escalation::ForgeFailed { reason }, Locale::En) => {
                format!("the forge refused — {}", cx.agent(reason))
            }
            (Escalation::MergeRefused { reason }, Locale::Ko) => {
                format!("포지가 병합을 거부함 — {}", cx.agent(reason))
            }
            (Escalation::MergeRefused { reason }, Locale::En) => {
                format!("the forge refused the merge — {}", cx.agent(reason))
            }
        };
        return Line {
            text: match l {
                Locale::Ko => format!("🚨 {id} {what}. {} 확인 필요", cx.nickname),
                Locale::En => format!("🚨 {id}: {what}. {}, please take a look", cx.nickname),
            },
            mention: true,
        };
    }
    if let Some(Note::Moved { reviewed, why }) = &t.note {
        let darang = sister(Actor::Darang, l);
        let reviewed = short_commit(reviewed);
        return plain(match l {
            Locale::Ko => format!(
                "⚠️ {id} 배포 안 함: 승인된 커밋 {reviewed}가 아님 — {}. {darang}가 다시 리뷰 (`hanarang sprint show {id}`)",
                cx.agent(why)
            ),
            Locale::En => format!(
                "⚠️ {id} not deployed: what would deploy is not the approved commit {reviewed} — {}. Back to {darang}'s review (`hanarang sprint show {id}`)",
                cx.agent(why)
            ),
        });
    }
    if let Some(Note::ProtocolViolation { reason }) = &t.note {
        return plain(match l {
            Locale::Ko => format!("🛑 {id} 중단: 규약 위반 — {}", cx.agent(reason)),
            Locale::En => format!("🛑 {id} aborted: protocol violation — {}", cx.agent(reason)),
        });
    }

    let detail = named(&t.detail, cx.person);
    match (&detail, t.from, t.to) {
        (Event::Reviewed { reviewer, verdict }, _, _) => {
            let (emoji, who) = (Actor::Darang.emoji(), reviewer_name(reviewer, l));
            let verdict = verdict.verdict();
            plain(match l {
                Locale::Ko => format!("{emoji} {who} 판정: {verdict} (라운드 {})", t.round),
                Locale::En => format!("{emoji} {who}'s verdict: {verdict} (round {})", t.round),
            })
        }
        (Event::ReviewMerged { verdicts }, State::Reviewing, State::Implementing) => {
            let asked: Vec<&str> = verdicts
                .iter()
                .filter(|(_, v)| {
                    **v == crate::pipeline::review_round::ReviewVerdict::RequestChanges
                })
                .map(|(name, _)| name.as_str())
                .collect();
            let narang = sister(Actor::Narang, l);
            plain(match l {
                Locale::Ko => format!(
                    "🔁 리뷰 종합: 변경 요청 ({}) — {narang}가 라운드 {} 구현",
                    asked.join(", "),
                    t.round
                ),
                Locale::En => format!(
                    "🔁 Reviews merged: changes requested ({}) — {narang} implements round {}",
                    asked.join(", "),
                    t.round
                ),
            })
        }
        (Event::Handoff { by, .. }, _, to) => {
            let who = to.stage().map(|s| sister(s.actor(), l)).unwrap_or_default();
            plain(match l {
                Locale::Ko => format!("🔄 {who} 새 세션으로 교대 (요청: {by})"),
                Locale::En => format!("🔄 {who} handed off to a fresh session (asked by {by})"),
            })
        }
        // Into planning, whatever the event (a resume too): harang starts.
        (_, _, State::Planning) => plain(starts(Stage::Planning, t, cx)),
        (Event::Reported { .. }, State::Reviewing, State::Implementing) => {
            let darang = sister(Actor::Darang, l);
            plain(match l {
                Locale::Ko => format!("🔁 {darang} re-review 요청 (라운드 {})", t.round),
                Locale::En => format!("🔁 {darang} asks for changes (round {})", t.round),
            })
        }
        (Event::RequestChanges { by, note }, _, State::Implementing) => plain(match l {
            Locale::Ko => format!("🔁 {by} 변경 요청 (라운드 {}): {}", t.round, one_line(note)),
            Locale::En => format!(
                "🔁 {by} asks for changes (round {}): {}",
                t.round,
                one_line(note)
            ),
        }),
        (Event::Resume { by, .. }, _, State::Verifying) => plain(match l {
            Locale::Ko => format!("▶️ {by}님이 {id} 재개: CI 검사를 다시 기다림"),
            Locale::En => format!("▶️ {by} resumed {id}: waiting for the forge's checks again"),
        }),
        (Event::Resume { by, .. }, _, State::Done) => plain(match l {
            Locale::Ko => format!("▶️ {by}님이 {id} 재개: 배포 승인을 다시 기다림"),
            Locale::En => format!("▶️ {by} resumed {id}: waiting for the deploy approval again"),
        }),
        (Event::Published { pr, url, head }, _, _) => plain(match l {
            Locale::Ko => format!("🔗 PR #{pr} ({}): {url}", short_commit(head)),
            Locale::En => format!("🔗 Pull request #{pr} at {}: {url}", short_commit(head)),
        }),
        (Event::ChecksFailed { failed, .. }, _, State::Implementing) => {
            let names: Vec<&str> = failed.iter().map(|c| c.name.as_str()).collect();
            let narang = sister(Actor::Narang, l);
            let names = cx.agent(&names.join(", "));
            plain(match l {
                Locale::Ko => format!("🔴 CI 실패: {names} — {narang}가 라운드 {} 구현", t.round),
                Locale::En => format!(
                    "🔴 CI failed: {names} — {narang} implements round {}",
                    t.round
                ),
            })
        }
        (Event::ForgeMerged { by, commit }, _, State::Deployed) => {
            plain(merged(id, by.as_deref(), commit.as_deref(), l))
        }
        (Event::Approve { by }, _, State::Deployed) => {
            let commit = match &t.note {
                Some(Note::Merged { commit, .. }) => commit.as_deref(),
                _ => None,
            };
            plain(merged(id, Some(by), commit, l))
        }
        (Event::Resume { by, .. }, _, to) => {
            let stage = to.stage().unwrap_or(Stage::Planning);
            plain(match l {
                Locale::Ko => format!(
                    "▶️ {by}님이 {id} 재개: {}가 {} 다시 시작",
                    sister(stage.actor(), l),
                    stage_name(stage, l)
                ),
                Locale::En => format!(
                    "▶️ {by} resumed {id}: {} starts {} again",
                    sister(stage.actor(), l),
                    stage_name(stage, l)
                ),
            })
        }
        (Event::Approve { by }, _, State::Deploying) => {
            let (erang, deploying) = (Actor::Erang, stage_name(Stage::Deploying, l));
            let (emoji, who) = (erang.emoji(), sister(erang, l));
            let of = approved_commit(t).map(short_commit);
            plain(match (l, of) {
                (Locale::Ko, Some(c)) => {
                    format!("{emoji} {by}님 {c} 배포 승인: {who}가 {deploying} 시작")
                }
                (Locale::Ko, None) => format!("{emoji} {by}님 배포 승인: {who}가 {deploying} 시작"),
                (Locale::En, Some(c)) => {
                    format!("{emoji} {by} approved deploying {c}: {who} starts {deploying}")
                }
                (Locale::En, None) => {
                    format!("{emoji} {by} approved the deploy: {who} starts {deploying}")
                }
            })
        }
        (_, _, State::Done) => Line {
            text: checks_passed(t, cx)
                + &match (l, approved_commit(t).map(short_commit)) {
                    (Locale::Ko, Some(c)) => format!("✅ {id} 완료. {c} 배포 승인해주세요"),
                    (Locale::Ko, None) => format!("✅ {id} 완료. 배포 승인해주세요"),
                    (Locale::En, Some(c)) => {
                        format!("✅ {id} is done. Please approve deploying {c}")
                    }
                    (Locale::En, None) => format!("✅ {id} is done. Please approve the deploy"),
                },
            mention: true,
        },
        (_, _, State::Deployed) => plain(match l {
            Locale::Ko => format!("🎉 {id} 배포 완료"),
            Locale::En => format!("🎉 {id} deployed"),
        }),
        (event, from, State::Aborted) => {
            let why = match event {
                Event::ForgeClosed { by } => match (by, l) {
                    (Some(by), Locale::Ko) => format!("{by}님이 포지에서 PR을 닫음"),
                    (None, Locale::Ko) => "포지에서 PR이 닫힘".to_string(),
                    (Some(by), Locale::En) => {
                        format!("its pull request was closed on the forge by {by}")
                    }
                    (None, Locale::En) => "its pull request was closed on the forge".to_string(),
                },
                Event::Abort { by, reason } => match (reason, l) {
                    (Some(r), Locale::Ko) => format!("{by}님이 중단 — {}", one_line(r)),
                    (None, Locale::Ko) => format!("{by}님이 중단"),
                    (Some(r), Locale::En) => format!("stopped by {by} — {}", one_line(r)),
                    (None, Locale::En) => format!("stopped by {by}"),
                },
                Event::Reported { actor, reason, .. } => {
                    let who = sister(*actor, l);
                    let reason = reason.as_deref().map(|r| cx.agent(r)).unwrap_or_default();
                    match l {
                        Locale::Ko => format!("{who}가 중단 판정 — {reason}"),
                        Locale::En => format!("{who} called it off — {reason}"),
                    }
                }
                Event::ReviewMerged { verdicts } => {
                    let by: Vec<&str> = verdicts
                        .iter()
                        .filter(|(_, v)| **v == crate::pipeline::review_round::ReviewVerdict::Abort)
                        .map(|(name, _)| name.as_str())
                        .collect();
                    let who = reviewer_name(&by.join(", "), l);
                    match l {
                        Locale::Ko => format!("{who}가 중단 판정"),
                        Locale::En => format!("{who} called it off"),
                    }
                }
                _ => from.to_string(),
            };
            plain(match l {
                Locale::Ko => format!("🛑 {id} 중단: {why}"),
                Locale::En => format!("🛑 {id} aborted: {why}"),
            })
        }
        (_, _, State::Verifying) => plain(match l {
            Locale::Ko => format!(
                "📤 {} 승인: 브랜치를 올리고 PR의 CI 검사를 기다림",
                sister(Actor::Darang, l)
            ),
            Locale::En => format!(
                "📤 {} approved: the branch goes to the forge, and its checks are waited for",
                sister(Actor::Darang, l)
            ),
        }),
        // Into a stage: its sister starts.
        (_, from, to) => plain(match to.stage() {
            Some(stage) => starts(stage, t, cx),
            None => format!("{id}: {from} → {to}"),
        }),
    }
}

/// The event with the people who gave it named as the line shows them.
fn named(event: &Event, person: fn(&str) -> String) -> Event {
    let mut event = event.clone();
    match &mut event {
        Event::Approve { by }
        | Event::RequestChanges { by, .. }
        | Event::Resume { by, .. }
        | Event::Abort { by, .. }
        | Event::Handoff { by, .. } => *by = person(by),
        _ => {}
    }
    event
}

/// `🎉 SPRINT-001 merged as abc1234 by octocat`.
fn merged(id: &str, by: Option<&str>, commit: Option<&str>, l: Locale) -> String {
    let commit = commit.map(short_commit).unwrap_or("?");
    match (l, by) {
        (Locale::Ko, Some(by)) => format!("🎉 {id} 병합됨: {commit} ({by})"),
        (Locale::Ko, None) => format!("🎉 {id} 병합됨: {commit}"),
        (Locale::En, Some(by)) => format!("🎉 {id} merged as {commit} by {by}"),
        (Locale::En, None) => format!("🎉 {id} merged as {commit}"),
    }
}

/// What the forge's checks said, heading the done line they lead to (`🟢 CI passed: build,
/// test — `); empty for any other move into done.
fn checks_passed(t: &TransitionRecord, cx: &Context<'_>) -> String {
    let Event::ChecksPassed { checks, none, .. } = &t.detail else {
        return String::new();
    };
    match (cx.locale, *none, checks.is_empty()) {
        (Locale::Ko, true, _) => "🟢 CI 없음: 10분 안에 보고된 검사 없음 — ".into(),
        (Locale::En, true, _) => {
            "🟢 No CI ran: the forge reported no check within 10 minutes — ".into()
        }
        (Locale::Ko, false, true) => "🟢 CI를 기다리지 않음 (ci = \"none\") — ".into(),
        (Locale::En, false, true) => {
            "🟢 The forge's checks are not waited for (ci = \"none\") — ".into()
        }
        (Locale::Ko, false, false) => format!("🟢 CI 통과: {} — ", cx.agent(&checks.join(", "))),
        (Locale::En, false, false) => format!("🟢 CI passed: {} — ", cx.agent(&checks.join(", "))),
    }
}

/// The commit a move into `done` or `deploying` is for, when git told it.
fn approved_commit(t: &TransitionRecord) -> Option<&str> {
    match &t.note {
        Some(Note::Approved { head } | Note::Merged { head, .. }) => Some(head),
        _ => None,
    }
}

/// One of darang's reviewers, as the lines name it.
fn reviewer_name(reviewer: &str, locale: Locale) -> String {
    let darang = sister(Actor::Darang, locale);
    match locale {
        Locale::Ko => format!("{darang} 리뷰어 {reviewer}"),
        Locale::En => format!("{darang}'s reviewer {reviewer}"),
    }
}

/// A stage's sister starts (`🚀 이랑이가 배포 시작`), with what it starts on where the
/// design's line names it: the sprint planned, the branch, the round.
fn starts(stage: Stage, t: &TransitionRecord, cx: &Context<'_>) -> String {
    let (l, id, actor) = (cx.locale, cx.sprint_id, stage.actor());
    let (emoji, who, work) = (actor.emoji(), sister(actor, l), stage_name(stage, l));
    // The branch of the transition's moment, even when the line is delivered late; a
    // sister may have named it.
    let branch = cx.agent(t.branch.as_deref().unwrap_or(cx.branch));
    let round = t.round;
    match (stage, l) {
        (Stage::Planning, Locale::Ko) => format!("{emoji} {who}가 {id} {work} 시작"),
        (Stage::Planning, Locale::En) => format!("{emoji} {who} starts {work} {id}"),
        (Stage::Implementing, Locale::Ko) => format!("{emoji} {who}가 {work} 시작 ({branch})"),
        (Stage::Implementing, Locale::En) => format!("{emoji} {who} starts {work} ({branch})"),
        (Stage::Reviewing, Locale::Ko) => format!("{emoji} {who}가 {work} 시작 (라운드 {round})"),
        (Stage::Reviewing, Locale::En) => format!("{emoji} {who} starts {work} (round {round})"),
        (_, Locale::Ko) => format!("{emoji} {who}가 {work} 시작"),
        (_, Locale::En) => format!("{emoji} {who} starts {work}"),
    }
}

/// Sister-written text on one line, cut so a line stays readable (Discord's own limits are
/// applied by the bridge).
pub fn one_line(text: &str) -> String {
    one_line_cow(text).into_owned()
}

/// `one_line`, borrowing `text` when it is one line already (the usual goal).
pub fn one_line_cow(text: &str) -> std::borrow::Cow<'_, str> {
    const MAX: usize = 300;
    // One line of single spaces and short enough (bytes bound characters): as is.
    // ASCII, the usual case, is judged byte by byte: its white space other than a space
    // is tab, line feed, vertical tab, form feed and carriage return.
    let other_space = if text.is_ascii() {
        text.bytes().any(|b| (b'\t'..=b'\r').contains(&b))
    } else {
        text.chars().any(|c| c.is_whitespace() && c != ' ')
    };
    let flat_already = text.len() <= MAX
        && !text.starts_with(' ')
        && !text.ends_with(' ')
        && !text.contains("  ")
        && !other_space;
    if flat_already {
        return std::borrow::Cow::Borrowed(text);
    }
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    std::borrow::Cow::Owned(match flat.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    })
}

/// What a running sister is doing now, as the board and `run`'s status line show it: its
/// latest step, how long its run has gone, the tokens and cost so far. `None` before it
/// told a step.
pub fn now_text(live: &crate::store::RunLive, run_started_at: i64, now_ms: i64) -> Option<String> {
    let step = live.step.as_deref()?;
    let elapsed =
        Duration::from_secs(u64::try_from((now_ms - run_started_at).max(0) / 1000).unwrap_or(0));
    let mut text = format!("{step} · {}", humantime::format_duration(elapsed));
    let tokens = live.input_tokens.saturating_add(live.output_tokens);
    if tokens > 0 {
        text.push_str(&format!(" · {tokens} tokens"));
    }
    if let Some(cost) = live.cost_usd {
        text.push_str(&format!(" · ${cost:.2}"));
    }
    Some(text)
}

/// The status line `run` keeps under the last line on a terminal: who is at work and for
/// how long, or when a waiting retry starts.
pub fn status_line(sprint: &Sprint, cx: &Context<'_>, now_ms: i64) -> Option<String> {
    let stage = sprint.state.stage()?;
    let actor = stage.actor();
    let l = cx.locale;
    let who = format!("{} {}", actor.emoji(), sister(actor, l));
    let since = |ms: i64| Duration::from_secs(u64::try_from(ms.max(0)).unwrap_or(0) / 1000);
    if let Some(at) = sprint.next_run_at.filter(|&at| at > now_ms) {
        let wait = short_duration(Duration::from_millis(
            u64::try_from(at - now_ms).unwrap_or(0),
        ));
        return Some(match l {
            Locale::Ko => format!("⏳ {who} {} 재시도 대기 · {wait} 후", stage_name(stage, l)),
            Locale::En => format!(
                "⏳ {who} waits to retry {} · in {wait}",
                stage_name(stage, l)
            ),
        });
    }
    let started = sprint.next_run_at.unwrap_or(0).max(sprint.updated_at);
    let elapsed = humantime::format_duration(since(now_ms - started));
    let (round, attempt, max) = (sprint.round, sprint.attempt, cx.max_attempts);
    Some(match l {
        Locale::Ko => format!(
            "{who} {} 중 · 라운드 {round} · 시도 {attempt}/{max} · {elapsed}",
            stage_name(stage, l)
        ),
        Locale::En => format!(
            "{who} {} · round {round} · attempt {attempt}/{max} · {elapsed}",
            stage_name(stage, l)
        ),
    })
}

/// The words of `run`'s deploy question at the terminal.
pub struct DeployPrompt {
    pub question: String,
    pub what_to_change: &'static str,
    pub note_needed: &'static str,
}

pub fn deploy_prompt(sprint_id: &str, locale: Locale) -> DeployPrompt {
    match locale {
        Locale::Ko => DeployPrompt {
            question: format!(
                "{sprint_id} 배포할까요? [y] 배포 승인 / [n] 변경 요청 / [a] 중단 / [l] 나중에: "
            ),
            what_to_change: "무엇을 바꿀까요? ",
            note_needed: "변경 요청에는 내용이 필요해요",
        },
        Locale::En => DeployPrompt {
            question: format!(
                "Deploy {sprint_id}? [y] approve / [n] request changes / [a] abort / [l] later: "
            ),
            what_to_change: "What should change? ",
            note_needed: "a request for changes needs a note",
        },
    }
}
