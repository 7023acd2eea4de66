//! The durable path of a message (docs/architecture.md, "The path of a message"): the inbox sink
//! channels deliver into, the dispatcher that runs each conversation's entries in order, the
//! handler that turns an entry into a reply, and the delivery worker that takes replies from the
//! outbox to the platforms.

mod attachments;
pub mod background;
pub mod confirm;
pub mod delivery;
pub mod dispatcher;
pub mod handler;
pub mod preview;
mod scheduled;
pub mod sink;

use std::collections::HashMap;
use std::sync::Arc;

use hearth_channel::Channel;

pub use scheduled::AnswersOnTheirWay;

/// The configured channels by name.
pub type Channels = Arc<HashMap<String, Arc<dyn Channel>>>;
