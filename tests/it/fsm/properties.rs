//! The pipeline's rules as properties over random event sequences: every sequence comes to
//! rest or waits on a person, a failure never loops, and `decide` says the same as `apply`.

use super::*;

/// Every event the generator can pick from.
fn all_events() -> Vec<Event> {
    let mut events: Vec<Event> = columns().into_iter().map(|(_, e, _)| e).collect();
    for kind in [
        FailureKind::SpawnFailed,
        FailureKind::ExitNonzero,
        FailureKind::Timeout,
    ] {
        events.push(failed(kind));
    }
    events
}

/// One step of a random walk: which event, from which pool (mostly the events that move
/// the sprint on without ending it, so walks get deep into the pipeline; sometimes any
/// accepted event, or any event at all so refusals are exercised), and whether a sister
/// is running.
fn arb_step() -> impl Strategy<Value = (usize, u8, bool)> {
    (any::<usize>(), 0u8..10, any::<bool>())
}

fn arb_policy() -> impl Strategy<Value = Policy> {
    (1u32..5, 1u32..5).prop_map(|(max_attempts, max_review_rounds)| Policy {
        max_attempts,
        max_review_rounds,
        ..policy()
    })
}

fn is_failure(event: &Event) -> bool {
    matches!(
        event,
        Event::Failed { .. }
            | Event::Reported {
                verdict: Verdict::Error | Verdict::DeployFailed,
                ..
            }
    )
}

/// Whether a resting state (terminal or escalated) can be reached from `start` without a
/// user's abort: nothing can wander forever.
fn can_come_to_rest(start: Position, policy: &Policy) -> bool {
    let mut events: Vec<Event> = columns()
        .into_iter()
        .map(|(_, e, _)| e)
        .filter(|e| !matches!(e, Event::Abort { .. }))
        .collect();
    events.push(failed(FailureKind::Timeout));
    let mut seen = HashSet::new();
    let mut queue = VecDeque::from([(start, 0)]);
    while let Some((pos, depth)) = queue.pop_front() {
        if pos.state.is_terminal() || pos.state == State::Escalated {
            return true;
        }
        if depth > 12 || !seen.insert(format!("{pos:?}")) {
            continue;
        }
        for event in &events {
            if let Ok(t) = apply(pos, event, facts(false), policy) {
                queue.push_back((t.to, depth + 1));
            }
        }
    }
    false
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_event_sequences_keep_the_invariants(
        policy in arb_policy(),
        steps in proptest::collection::vec(arb_step(), 1..60),
    ) {
        let all = all_events();
        let mut pos = Position::QUEUED;
        let mut approved = false;
        for (pick, pool, running) in steps {
            // What the work showed: nothing, a head left where it was, findings repeated.
            let unchanged_head = (pick / 7 % 4 == 1 || pick / 7 % 4 == 3).then_some("3f2a1c9e");
            let same_findings = pick / 7 % 4 >= 2;
            let facts = |running| Facts { unchanged_head, same_findings, ..facts(running) };
            let accepted: Vec<&Event> = all
                .iter()
                .filter(|e| apply(pos, e, facts(running), &policy).is_ok())
                .collect();
            let onward: Vec<&Event> = accepted
                .iter()
                .copied()
                .filter(|e| {
                    apply(pos, e, facts(running), &policy)
                        .is_ok_and(|t| t.to.state != State::Aborted)
                })
                .collect();
            let event = match pool {
                0..=7 if !onward.is_empty() => onward[pick % onward.len()].clone(),
                8 if !accepted.is_empty() => accepted[pick % accepted.len()].clone(),
                _ => all[pick % all.len()].clone(),
            };
            let result = apply(pos, &event, facts(running), &policy);
            if pos.state.is_terminal() {
                prop_assert!(result.is_err(), "{} accepted {:?}", pos.state, event);
                continue;
            }
            let Ok(t) = result else { continue };
            prop_assert_eq!(t.from, pos);
            let to = t.to;

            // Nothing is reviewed twice for nothing: a head left where it was is never
            // sent to review, and repeated findings never start another round.
            if let Event::Reported { verdict, .. } = &event {
                if *verdict == Verdict::ImplDone && unchanged_head.is_some() && pos.state == State::Implementing {
                    prop_assert_eq!(to.state, State::Escalated);
                }
                if *verdict == Verdict::RequestChanges && same_findings && pos.state == State::Reviewing {
                    prop_assert_eq!(to.state, State::Escalated);
                }
            }

            // Attempts never exceed the limit.
            prop_assert!(to.attempt <= policy.max_attempts, "attempt {} > {}", to.attempt, policy.max_attempts);
            if to.state.stage().is_some() {
                prop_assert!(to.attempt >= 1);
            }

            // A sister's verdict never starts a round past the limit; only a human can.
            if !event.is_human() && to.state == State::Implementing && pos.state != State::Implementing {
                prop_assert!(to.round <= policy.max_review_rounds, "round {} > {}", to.round, policy.max_review_rounds);
            }

            // Every failure counts exactly once.
            if is_failure(&event) && pos.state.stage().is_some() && !matches!(t.note, Some(Note::ProtocolViolation { .. })) {
                if to.state == pos.state {
                    prop_assert_eq!(to.attempt, pos.attempt + 1);
                } else {
                    prop_assert_eq!(to.state, State::Escalated);
                }
            }

            // A deploy is only entered through a human's word: approval from done, or
            // resuming an escalated deploy.
            if to.state == State::Deploying && pos.state != State::Deploying {
                let by_approval = matches!(event, Event::Approve { .. }) && pos.state == State::Done;
                let by_resume = matches!(event, Event::Resume { .. })
                    && pos.state == State::Escalated
                    && pos.resume.map(|r| r.stage) == Some(State::Deploying);
                prop_assert!(by_approval || by_resume, "deploying entered from {} by {:?}", pos.state, event);
                prop_assert!(approved || by_approval, "a deploy before any approval");
            }
            if matches!(event, Event::Approve { .. }) {
                approved = true;
            }

            // Escalated always knows where to resume.
            prop_assert_eq!(to.state == State::Escalated, to.resume.is_some());

            pos = to;
            prop_assert!(can_come_to_rest(pos, &policy), "stuck at {:?}", pos);
        }
    }
}

/// What the loop may know around an event, drawn at random: a wait recorded, a focus
/// waiting, a limit (raised or not) and what was spent, several reviewers, room to start.
#[derive(Debug, Clone)]
struct Around {
    next_run_at: Option<i64>,
    focus: Option<(String, Option<String>)>,
    limit_usd: Option<f64>,
    raised_usd: Option<f64>,
    spent_usd: f64,
    several_reviewers: bool,
    may_start: bool,
    named: bool,
}

fn arb_around() -> impl Strategy<Value = Around> {
    (
        proptest::option::of(0i64..2_000_000),
        proptest::option::of(("[a-z ]{1,12}", proptest::option::of("discord:[0-9]{3}"))),
        proptest::option::of(1.0f64..10.0),
        proptest::option::of(1.0f64..20.0),
        0.0f64..25.0,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(next_run_at, focus, limit_usd, raised_usd, spent_usd, several, may_start, named)| {
                Around {
                    next_run_at,
                    focus,
                    limit_usd,
                    raised_usd,
                    spent_usd,
                    several_reviewers: several,
                    may_start,
                    named,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// `decide` is `apply` plus the rules around it, and the loop adds none: whether the
    /// stage's sister starts with the commit, where a person's words go, what a resume
    /// does to the budget, what frees the lock and stops reviewers.
    #[test]
    fn a_decision_is_the_whole_rule(
        policy in arb_policy(),
        steps in proptest::collection::vec((arb_step(), arb_around()), 1..40),
    ) {
        const NOW: i64 = 1_000_000;
        let all = all_events();
        let mut pos = Position::QUEUED;
        for ((pick, _, running), around) in steps {
            let event = {
                let accepted: Vec<&Event> = all
                    .iter()
                    .filter(|e| apply(pos, e, facts(running), &policy).is_ok())
                    .collect();
                if accepted.is_empty() || pick % 5 == 0 {
                    all[pick % all.len()].clone()
                } else {
                    accepted[pick % accepted.len()].clone()
                }
            };
            let budget = Budget { limit_usd: around.limit_usd, raised_usd: around.raised_usd };
            let before = Before {
                position: pos,
                next_run_at: around.next_run_at,
                focus: around.focus.as_ref().map(|(text, by)| (text.as_str(), by.as_deref())),
                budget,
                spent_usd: around.spent_usd,
                named_contract: around.named.then_some("C-9"),
                named_branch: around.named.then_some("sprint/9"),
                may_start: around.may_start,
            };
            let facts = |running| Facts { several_reviewers: around.several_reviewers, ..facts(running) };
            let applied = apply(pos, &event, facts(running), &policy);
            let decided = decide(before, &event, facts(running), &policy, NOW);
            let d = match (applied, decided) {
                (Err(a), Err(b)) => { prop_assert_eq!(a, b); continue; }
                (Ok(t), Ok(d)) => { prop_assert_eq!(&t, &d.transition); d }
                (a, b) => { prop_assert!(false, "apply {:?} but decide {:?}", a, b); unreachable!() }
            };
            let to = d.transition.to;

            // The budget: only a person's resume raises it, and past the limit it raises
            // it enough to go on.
            if matches!(event, Event::Resume { .. }) && around.limit_usd.is_some() {
                let raised = Budget { raised_usd: d.budget_usd, ..budget };
                if budget.exceeded(around.spent_usd).is_some() {
                    prop_assert!(raised.exceeded(around.spent_usd).is_none());
                }
            } else {
                prop_assert_eq!(d.budget_usd, around.raised_usd);
            }
            let spent_out = Budget { raised_usd: d.budget_usd, ..budget }
                .exceeded(around.spent_usd)
                .is_some();

            // The stage's sister starts with the commit exactly when it may.
            let several_here = around.several_reviewers && to.state == State::Reviewing;
            let starts = to.state.stage().is_some()
                && !several_here
                && d.next_run_at.is_none()
                && !running
                && around.may_start
                && !spent_out;
            match &d.launch {
                Launch::Stage { stage, attempt, .. } => {
                    prop_assert!(starts, "started {:?} from {:?} by {:?}", to, pos, event);
                    prop_assert_eq!(Some(*stage), to.state.stage());
                    prop_assert_eq!(*attempt, to.attempt);
                }
                Launch::Reviewers => prop_assert!(several_here),
                Launch::Nothing => prop_assert!(!starts && !several_here),
            }
            // A retry's wait or a pause is never skipped.
            if d.transition.retry_delay().is_some() {
                prop_assert!(d.next_run_at.is_some());
            }

            // A person's words are never lost: the run started takes them, else the
            // sprint keeps them; the event's words replace the ones waiting.
            let given = match &d.launch {
                Launch::Stage { focus, .. } => {
                    prop_assert!(d.focus.is_none());
                    focus.clone()
                }
                _ => d.focus.clone(),
            };
            let expected = event
                .focus()
                .map(|(by, text)| (text.to_string(), Some(by.to_string())))
                .or(around.focus.clone());
            prop_assert_eq!(given.map(|f| (f.text, f.by)), expected);

            // What a sister named is the sprint's, unless the sprint is aborted.
            let named = around.named && to.state != State::Aborted;
            prop_assert_eq!(d.contract_id.is_some(), named);
            prop_assert_eq!(d.branch.is_some(), named);

            prop_assert_eq!(d.frees_lock, to.state.is_terminal());
            prop_assert_eq!(
                d.stops_reviewers,
                around.several_reviewers && pos.state == State::Reviewing && to.state != State::Reviewing
            );
            pos = to;
        }
    }
}
