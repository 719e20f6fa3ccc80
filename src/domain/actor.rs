//! The four sisters and every verdict they can give.

use std::fmt;

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

impl Actor {
    pub const ALL: [Actor; 4] = [Actor::Harang, Actor::Narang, Actor::Darang, Actor::Erang];

    /// The name used in JSON, the CLI and config tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Actor::Harang => "harang",
            Actor::Narang => "narang",
            Actor::Darang => "darang",
            Actor::Erang => "erang",
        }
    }

    /// The sister's Korean name, as the design's messages use it.
    pub fn korean_name(self) -> &'static str {
        match self {
            Actor::Harang => "하랑이",
            Actor::Narang => "나랑이",
            Actor::Darang => "다랑이",
            Actor::Erang => "이랑이",
        }
    }

    pub fn emoji(self) -> &'static str {
        match self {
            Actor::Harang => "🦊",
            Actor::Narang => "⚙️",
            Actor::Darang => "🔍",
            Actor::Erang => "🚀",
        }
    }

    /// The role in one English word.
    pub fn role(self) -> &'static str {
        match self {
            Actor::Harang => "planner",
            Actor::Narang => "implementer",
            Actor::Darang => "reviewer",
            Actor::Erang => "deployer",
        }
    }

    /// The verdicts this sister may return.
    pub fn verdicts(self) -> &'static [Verdict] {
        match self {
            Actor::Harang => &[Verdict::PlanReady, Verdict::Abort],
            Actor::Narang => &[Verdict::ImplDone, Verdict::Error],
            Actor::Darang => &[Verdict::Approve, Verdict::RequestChanges, Verdict::Abort],
            Actor::Erang => &[Verdict::DeployDone, Verdict::DeployFailed],
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
            .ok_or_else(|| {
                format!("unknown actor {s:?} (expected harang, narang, darang or erang)")
            })
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
