//! What a sister is given: the contract file (JSON, written before the spawn) and the
//! prompt on stdin, which ends with the handoff document as the design wraps it.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::handoff::document::render_handoff_context;
use crate::handoff::message::{Actor, ReviewIssue};
use crate::handoff::{HandoffDocument, HandoffMessage};

/// The JSON file at `{contract_file}` / `$HANARANG_CONTRACT_FILE`. Field names are part
/// of the public interface (README documents them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContractFile {
    pub sprint_id: String,
    pub goal: String,
    pub project: String,
    pub role: Actor,
    pub round: u32,
    pub attempt: u32,
    pub branch: String,
    pub contract_id: String,
    pub run_id: String,
    pub workdir: String,
    /// The previous sister's validated message, when there is one.
    pub previous_message: Option<HandoffMessage>,
    /// For narang after REQUEST_CHANGES: what the reviewer wants fixed.
    #[serde(default)]
    pub review_issues: Vec<ReviewIssue>,
    /// The handoff document this session starts from.
    pub handoff: HandoffDocument,
    /// True when the orchestrator composed the document (the previous sister sent none).
    pub handoff_synthesized: bool,
    /// A user's focus instructions (start, resume, request-changes, handoff).
    pub focus: Option<String>,
    /// Why this sister's previous output was rejected, when the last attempt was bad
    /// output: the one repair chance.
    pub previous_rejection: Option<String>,
    /// The JSON Schema (draft-07) of the message this sister must print.
    pub schema: serde_json::Value,
}

/// One line on what each sister does, for the top of its prompt.
fn duty(actor: Actor) -> &'static str {
    match actor {
        Actor::Harang => {
            "Write the sprint plan and its contract (what done means, as a checklist the reviewer can check)."
        }
        Actor::Narang => "Implement the plan on the sprint's branch and commit your work.",
        Actor::Darang => {
            "Review the implementation against the contract's checklist; approve it or request changes."
        }
        Actor::Erang => "Deploy the approved work and verify the deployment.",
    }
}

/// The prompt on the sister's stdin. It ends with the handoff document in
/// `<handoff-context>`, the design's closing sentence and, when given, the user's focus.
pub fn render_prompt(contract: &ContractFile, contract_path: &str) -> String {
    let actor = contract.role;
    let mut p = String::new();
    let _ = writeln!(
        p,
        "You are {} ({actor}), the {} of the hanarang pipeline. {}",
        actor.korean_name(),
        actor.role(),
        duty(actor)
    );
    let _ = writeln!(
        p,
        "\nSprint {} (round {}, attempt {}), project {:?}, working directory {}, branch {}.",
        contract.sprint_id,
        contract.round,
        contract.attempt,
        contract.project,
        contract.workdir,
        contract.branch
    );
    let _ = writeln!(p, "Goal: {}", contract.goal.trim());
    let _ = writeln!(
        p,
        "The contract file {contract_path} holds all of this as JSON, with the previous sister's message and the schema of your answer."
    );
    if let Some(rejection) = &contract.previous_rejection {
        let _ = writeln!(
            p,
            "\nYour previous answer was rejected: {rejection}\nAnswer again, following the schema exactly."
        );
    }
    if !contract.review_issues.is_empty() {
        let _ = writeln!(p, "\nThe reviewer asked for these changes:");
        for issue in &contract.review_issues {
            let place = match (&issue.file, issue.line) {
                (Some(f), Some(l)) => format!(" {f}:{l}"),
                (Some(f), None) => format!(" {f}"),
                _ => String::new(),
            };
            let _ = writeln!(
                p,
                "- [{}]{place} {}",
                serde_json::to_value(issue.severity)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                issue.message.trim()
            );
        }
    }
    let verdicts: Vec<&str> = actor.verdicts().iter().map(|v| v.as_str()).collect();
    let _ = writeln!(
        p,
        "\nWhen you are done, print exactly one JSON object on stdout: a HandoffMessage with \"actor\": \"{actor}\" and a verdict of {}. Print nothing else on stdout; write logs to stderr. Include a \"handoff\" document (goal, constraints, progress, keyDecisions, criticalContext, nextSteps) so the next session can continue from it.\n",
        verdicts.join(" or ")
    );
    p.push_str(&render_handoff_context(
        &contract.handoff,
        contract.focus.as_deref(),
    ));
    p
}
