//! The HandoffMessage a sister returns and the handoff document that carries context from
//! one session to the next: types, validation, JSON Schema and rendering.

pub mod document;
pub mod message;
pub mod quote;
pub mod schema;
pub mod synthesize;
pub mod validate;

pub use document::{HandoffDocument, render_handoff_context};
pub use message::{Actor, HandoffMessage, Verdict};
pub use validate::{Problem, Validated};
