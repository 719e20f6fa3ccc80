//! The four sisters and every verdict they can give. What is only data about a sister
//! (its names, emoji, role, verdicts, stage words, timeout, built-in prompt) is its row
//! in `Actor::info`; what it does differently is where the compiler points a new variant.

use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One of the four sisters.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Actor {
    Harang,
    Narang,
    Darang,
    Erang,
}

/// A phrase in each language the lines are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Words {
    pub ko: &'static str,
    pub en: &'static str,
}

/// What is only data about one sister: every place that names, shows, configures or
/// prompts a sister reads it here.
#[derive(Debug)]
pub struct ActorInfo {
    /// Its name in JSON, the CLI, its config table (`[agent.NAME]`), its prompt file
    /// (`NAME.md`) and the `actor:VERDICT` events; also the serde name of its variant.
    pub name: &'static str,
    /// Its name in the lines people read (`하랑이`, `Harang`).
    pub names: Words,
    pub emoji: &'static str,
    /// Its role in one English word.
    pub role: &'static str,
    /// The stage it runs in: what it does in the pipeline. Code that treats one sister
    /// differently asks this (or another property here), never its name.
    pub stage: Stage,
    /// Its stage, as the lines name it (`기획`, `planning`).
    pub work: Words,
    /// The verdicts it may return.
    pub verdicts: &'static [Verdict],
    /// How long one of its runs may take when its config says nothing (the design's).
    pub timeout: Duration,
    /// Its built-in role text (`src/sister/prompts/NAME.md`).
    pub prompt: &'static str,
}

impl Actor {
    /// In pipeline order.
    pub const ALL: [Actor; 4] = [Actor::Harang, Actor::Narang, Actor::Darang, Actor::Erang];

    /// This sister's row.
    pub const fn info(self) -> &'static ActorInfo {
        match self {
            Actor::Harang => &HARANG,
            Actor::Narang => &NARANG,
            Actor::Darang => &DARANG,
            Actor::Erang => &ERANG,
        }
    }

    /// The name used in JSON, the CLI and config tables.
    pub const fn as_str(self) -> &'static str {
        self.info().name
    }

    /// The sister's Korean name, as the design's messages use it.
    pub fn korean_name(self) -> &'static str {
        self.info().names.ko
    }

    pub fn emoji(self) -> &'static str {
        self.info().emoji
    }

    /// The role in one English word.
    pub fn role(self) -> &'static str {
        self.info().role
    }

    /// The stage it runs in.
    pub const fn stage(self) -> Stage {
        self.info().stage
    }

    /// The verdicts this sister may return.
    pub fn verdicts(self) -> &'static [Verdict] {
        self.info().verdicts
    }
}

const HARANG: ActorInfo = ActorInfo {
    name: "harang",
    names: Words {
        ko: "하랑이",
        en: "Harang",
    },
    emoji: "🦊",
    role: "planner",
    stage: Stage::Planning,
    work: Words {
        ko: "기획",
        en: "planning",
    },
    verdicts: &[Verdict::PlanReady, Verdict::Abort],
    timeout: Duration::from_secs(30 * 60),
    prompt: include_str!("../sister/prompts/harang.md"),
};

const NARANG: ActorInfo = ActorInfo {
    name: "narang",
    names: Words {
        ko: "나랑이",
        en: "Narang",
    },
    emoji: "⚙️",
    role: "implementer",
    stage: Stage::Implementing,
    work: Words {
        ko: "구현",
        en: "implementing",
    },
    verdicts: &[Verdict::ImplDone, Verdict::Error],
    timeout: Duration::from_secs(2 * 60 * 60),
    prompt: include_str!("../sister/prompts/narang.md"),
};

const DARANG: ActorInfo = ActorInfo {
    name: "darang",
    names: Words {
        ko: "다랑이",
        en: "Darang",
    },
    emoji: "🔍",
    role: "reviewer",
    stage: Stage::Reviewing,
    work: Words {
        ko: "리뷰",
        en: "reviewing",
    },
    verdicts: &[Verdict::Approve, Verdict::RequestChanges, Verdict::Abort],
    timeout: Duration::from_secs(30 * 60),
    prompt: include_str!("../sister/prompts/darang.md"),
};

const ERANG: ActorInfo = ActorInfo {
    name: "erang",
    names: Words {
        ko: "이랑이",
        en: "Erang",
    },
    emoji: "🚀",
    role: "deployer",
    stage: Stage::Deploying,
    work: Words {
        ko: "배포",
        en: "deploying",
    },
    verdicts: &[Verdict::DeployDone, Verdict::DeployFailed],
    timeout: Duration::from_secs(30 * 60),
    prompt: include_str!("../sister/prompts/erang.md"),
};

/// A state in which one sister runs: what that sister does in the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Planning,
    Implementing,
    Reviewing,
    Deploying,
}

impl Stage {
    pub const ALL: [Stage; 4] = [
        Stage::Planning,
        Stage::Implementing,
        Stage::Reviewing,
        Stage::Deploying,
    ];

    /// The sister that runs in this stage.
    pub const fn actor(self) -> Actor {
        match self {
            Stage::Planning => Actor::Harang,
            Stage::Implementing => Actor::Narang,
            Stage::Reviewing => Actor::Darang,
            Stage::Deploying => Actor::Erang,
        }
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Actor {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Actor::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| format!("unknown actor {s:?} (expected {})", one_of()))
    }
}

/// Every sister's name, as a sentence lists them: `harang, narang, darang or erang`.
fn one_of() -> String {
    let names = Actor::ALL.map(Actor::as_str);
    match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Every verdict of every sister, as one enum: what the state machine reasons about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    PlanReady,
    Abort,
    ImplDone,
    Error,
    Approve,
    RequestChanges,
    DeployDone,
    DeployFailed,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::PlanReady => "PLAN_READY",
            Verdict::Abort => "ABORT",
            Verdict::ImplDone => "IMPL_DONE",
            Verdict::Error => "ERROR",
            Verdict::Approve => "APPROVE",
            Verdict::RequestChanges => "REQUEST_CHANGES",
            Verdict::DeployDone => "DEPLOY_DONE",
            Verdict::DeployFailed => "DEPLOY_FAILED",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stage_has_the_sister_whose_row_names_it() {
        for stage in Stage::ALL {
            assert_eq!(stage.actor().stage(), stage);
        }
        for actor in Actor::ALL {
            assert_eq!(actor.stage().actor(), actor);
        }
    }

    #[test]
    fn a_sisters_name_is_its_serde_name_and_parses_back() {
        for actor in Actor::ALL {
            let json = serde_json::to_value(actor).unwrap();
            assert_eq!(json, actor.as_str(), "{actor:?}");
            assert_eq!(actor.as_str().parse::<Actor>(), Ok(actor));
        }
        assert_eq!(
            "jirang".parse::<Actor>(),
            Err("unknown actor \"jirang\" (expected harang, narang, darang or erang)".into())
        );
    }
}
