//! Which agent answers a message (docs/architecture.md, "Routing"): chat commands, keyword
//! triggers, stickiness.
//!
//! Pure decision logic without I/O. The dispatcher checks the sender, then calls
//! [`parse_command`] (commands, and a bare `@id` that switches), and only for ordinary text
//! [`Router::decide`] (mention, pin, keywords, stickiness), which `hearth route` calls too.
//! A [`Router`] is built once per [`AgentSet`] and reused for every message.
//!
//! Keyword matching rules, chosen so users can predict them:
//! - case-insensitive via `str::to_lowercase` (Unicode, locale-independent: "ÄRGER" matches
//!   "ärger", "GROẞE" matches "große", but "strasse" does not match "straße");
//! - typographic apostrophes (’) count as `'`, because phones insert them ("what’s on");
//! - whole words only: the characters just before and after a match must not be alphanumeric
//!   (`char::is_alphanumeric`), so "paid" does not match "unpaid";
//! - the words of a phrase match across any run of whitespace, line breaks included;
//! - each keyword counts once per agent however often it appears: the most distinct hits wins.

use hearth_channel::CommandInfo;

use crate::agent::{AgentDef, AgentSet};

/// A chat command (docs/architecture.md, "Routing", step 2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `/help` (also Telegram's `/start`).
    Help,
    /// `/agents`: list the agents.
    Agents,
    /// `/agent` shows the current agent; `/agent ID` switches. The id is lowercased but not
    /// checked: the caller answers an unknown one.
    Agent(Option<String>),
    /// `/reset`.
    Reset,
    /// `/new`.
    New,
    /// `/whoami`.
    Whoami,
    /// `/cancel`: stop the running turn.
    Cancel,
    /// `/cancel N`: stop background task N.
    CancelTask(i64),
    /// `/tasks`: the background tasks going and the recent ones.
    Tasks,
    /// `/usage`: tokens and cost, today and this month.
    Usage,
    /// `/compact [focus]`: summarise older turns now, keeping `focus` in particular.
    Compact(Option<String>),
    /// `/budget [USD]`: the owner sees today's spending and caps, or sets today's cap.
    Budget(Option<String>),
    /// `/plan`: the conversation's current plan, every step with its note.
    Plan,
    /// Any other `/name`, without slash and bot suffix, so the caller can suggest `/help`.
    Unknown(String),
}

/// The chat commands, as the daemon hands them to every channel at start
/// ([`hearth_channel::Channel::register_commands`]) for platforms with a command menu.
pub const COMMANDS: &[CommandInfo] = &[
    CommandInfo {
        name: "help",
        description: "What hearth can do",
    },
    CommandInfo {
        name: "agents",
        description: "List the agents",
    },
    CommandInfo {
        name: "agent",
        description: "Switch agent: /agent <id>",
    },
    CommandInfo {
        name: "new",
        description: "Start a new conversation",
    },
    CommandInfo {
        name: "reset",
        description: "Forget this conversation",
    },
    CommandInfo {
        name: "whoami",
        description: "Your identity and permissions",
    },
    CommandInfo {
        name: "cancel",
        description: "Stop the running turn",
    },
    CommandInfo {
        name: "tasks",
        description: "Background tasks; /cancel N stops one",
    },
    CommandInfo {
        name: "usage",
        description: "Tokens and cost, today and this month",
    },
    CommandInfo {
        name: "compact",
        description: "Summarise older turns now: /compact [focus]",
    },
    CommandInfo {
        name: "budget",
        description: "Today's spending and cap: /budget [USD]",
    },
    CommandInfo {
        name: "plan",
        description: "The current plan and its steps",
    },
];

/// What [`parse_command`] found at the start of a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A slash command.
    Command(Command),
    /// `@id rest`: a known agent addressed directly; `text` (possibly empty) is to be answered
    /// by that agent.
    Mention { agent: String, text: String },
}

/// Recognises a chat command or a leading `@id` of a known agent.
///
/// Returns `None` for ordinary text, which then goes to [`Router::route`]: that includes
/// `@someone` who is not an agent and slash words that cannot be commands ("/etc/hosts").
/// A Telegram-style `/cmd@BotName` suffix is accepted and ignored.
pub fn parse_command(text: &str, agents: &AgentSet) -> Option<Parsed> {
    if let Some(command) = parse_slash(text) {
        return Some(Parsed::Command(command));
    }
    let (id, rest) = split_mention(text)?;
    let agent = agents.get(&id)?;
    Some(Parsed::Mention {
        agent: agent.id.clone(),
        text: rest.to_owned(),
    })
}

/// A leading `@id` (lowercased, not checked) and the trimmed text after it.
fn split_mention(text: &str) -> Option<(String, &str)> {
    let body = text.trim_start().strip_prefix('@')?;
    let (token, rest) = split_first_word(body);
    // "@finance: how much …" and "@finance, …" read naturally in chat.
    let id = token.trim_end_matches([':', ',']).to_lowercase();
    Some((id, rest.trim()))
}

/// Whether the message is `/cancel`. The inbox uses it to stop a running turn at once instead
/// of queueing the command behind it; the same parser as [`parse_command`] decides.
pub fn is_cancel(text: &str) -> bool {
    parse_slash(text) == Some(Command::Cancel)
}

/// A slash command at the start of `text` (agents play no part in these).
fn parse_slash(text: &str) -> Option<Command> {
    let body = text.trim_start().strip_prefix('/')?;
    let (token, rest) = split_first_word(body);
    let name = token.split_once('@').map_or(token, |(name, _bot)| name);
    // Telegram's command syntax; anything else is text that happens to start with '/'.
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let name = name.to_ascii_lowercase();
    let command = match name.as_str() {
        "help" | "start" => Command::Help,
        "agents" => Command::Agents,
        "agent" => {
            let (arg, _) = split_first_word(rest.trim_start());
            let arg = arg.trim_start_matches('@');
            Command::Agent((!arg.is_empty()).then(|| arg.to_lowercase()))
        }
        "reset" => Command::Reset,
        "new" => Command::New,
        "whoami" => Command::Whoami,
        // `/cancel 3` (or `#3`) stops background task 3; anything else stops the running turn.
        "cancel" => match split_first_word(rest.trim_start())
            .0
            .trim_start_matches('#')
            .parse()
        {
            Ok(id) => Command::CancelTask(id),
            Err(_) => Command::Cancel,
        },
        "tasks" => Command::Tasks,
        "usage" => Command::Usage,
        "compact" => Command::Compact(argument(rest)),
        "budget" => Command::Budget(argument(rest)),
        "plan" => Command::Plan,
        _ => Command::Unknown(name),
    };
    Some(command)
}

/// The rest of a command's text, trimmed; `None` when there is none.
fn argument(rest: &str) -> Option<String> {
    let rest = rest.trim();
    (!rest.is_empty()).then(|| rest.to_string())
}

/// The first whitespace-separated word and the rest after it.
fn split_first_word(text: &str) -> (&str, &str) {
    text.split_once(char::is_whitespace).unwrap_or((text, ""))
}

/// What the router needs to know about one message and its conversation.
#[derive(Clone, Copy, Debug)]
pub struct RouteInput<'a> {
    /// The message text (after command handling).
    pub text: &'a str,
    /// The conversation's agent, if it has one.
    pub current_agent: Option<&'a str>,
    /// Whether the current agent is still within its sticky window (`sticky_minutes`).
    pub sticky: bool,
    /// `[router] default_agent`.
    pub default_agent: &'a str,
}

/// The conversation as the router sees it when an ordinary message (not a command) arrives.
#[derive(Clone, Copy, Debug)]
pub struct Situation<'a> {
    /// The conversation's agent, if it has one.
    pub current_agent: Option<&'a str>,
    /// Pinned with `/agent ID`: keywords do not move the conversation.
    pub pinned: bool,
    /// The conversation was active within `sticky_minutes` (see [`within_sticky`]).
    pub recent: bool,
    /// `[router] default_agent`.
    pub default_agent: &'a str,
}

/// Whether a conversation last active at `last_active_at` is still sticky at `now` (both ms).
pub fn within_sticky(last_active_at: i64, now: i64, sticky_minutes: u64) -> bool {
    let sticky_ms = i64::try_from(sticky_minutes.saturating_mul(60_000)).unwrap_or(i64::MAX);
    now.saturating_sub(last_active_at) <= sticky_ms
}

/// The whole routing decision for an ordinary message: what [`Router::decide`] returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routing<'t> {
    /// The chosen agent, why, and every agent's score.
    pub decision: Decision,
    /// What the agent answers: the message without a leading `@id`.
    pub text: &'t str,
    /// The conversation stays pinned to the agent.
    pub pin: bool,
    /// The agent the user was talking to, as they see it (the default agent for a new or idle
    /// conversation); the reply names the new agent when it differs.
    pub previous: String,
}

impl Routing<'_> {
    /// The agent changes from the user's point of view, so the reply says who answers.
    pub fn switched(&self) -> bool {
        self.decision.agent != self.previous
    }
}

/// Why an agent was chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The message started with `@id`.
    Mention,
    /// The conversation is pinned to its agent with `/agent ID`.
    Pinned,
    /// It had the most distinct keyword hits (these, as written in the agents file).
    Keywords { hits: Vec<String> },
    /// No keyword matched and the conversation keeps its current agent.
    Sticky,
    /// No keyword matched and there was no current agent within its sticky window.
    Default,
}

/// One agent's keyword hits for a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentScore {
    /// The agent's id.
    pub agent: String,
    /// Keywords that matched, as written in the agents file, in file order.
    pub hits: Vec<String>,
}

/// The router's answer for one message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The chosen agent's id.
    pub agent: String,
    /// Why it was chosen.
    pub reason: Reason,
    /// The agent differs from the conversation's current agent (true when there was none),
    /// so the reply should say who answers ([`switched_note`]).
    pub changed: bool,
    /// Every agent's hits, in file order.
    pub scores: Vec<AgentScore>,
}

/// Keyword triggers of an [`AgentSet`], prepared once and used for every message.
#[derive(Clone, Debug)]
pub struct Router {
    agents: Vec<CompiledAgent>,
}

#[derive(Clone, Debug)]
struct CompiledAgent {
    id: String,
    keywords: Vec<CompiledKeyword>,
}

#[derive(Clone, Debug)]
struct CompiledKeyword {
    /// As written in the agents file (trimmed), for hits and `hearth route`.
    written: String,
    /// Normalised words; a phrase has several.
    words: Vec<String>,
}

impl Router {
    /// Prepares the keywords of every agent, in file order.
    pub fn new(agents: &AgentSet) -> Router {
        let agents = agents
            .iter()
            .map(|agent| {
                let mut keywords: Vec<CompiledKeyword> = Vec::new();
                for keyword in &agent.triggers.keywords {
                    let words: Vec<String> = normalize(keyword)
                        .split_whitespace()
                        .map(str::to_owned)
                        .collect();
                    // Validation rejects empty keywords and duplicates; "what's" and "what’s"
                    // normalise alike, so drop such twins here to keep hits distinct.
                    if words.is_empty() || keywords.iter().any(|k| k.words == words) {
                        continue;
                    }
                    keywords.push(CompiledKeyword {
                        written: keyword.trim().to_owned(),
                        words,
                    });
                }
                CompiledAgent {
                    id: agent.id.clone(),
                    keywords,
                }
            })
            .collect();
        Router { agents }
    }

    /// Every agent's keyword hits for `text`, in file order.
    pub fn scores(&self, text: &str) -> Vec<AgentScore> {
        let text = normalize(text);
        self.agents
            .iter()
            .map(|agent| AgentScore {
                agent: agent.id.clone(),
                hits: agent
                    .keywords
                    .iter()
                    .filter(|k| k.matches(&text))
                    .map(|k| k.written.clone())
                    .collect(),
            })
            .collect()
    }

    /// The whole decision for an ordinary message, in order: a leading `@id` of a known agent,
    /// the conversation's pin, then [`Router::route`] (keywords, stickiness, the default agent).
    /// The daemon and `hearth route` both call this, so the command shows what the daemon does.
    pub fn decide<'t>(&self, text: &'t str, situation: Situation<'_>) -> Routing<'t> {
        let Situation {
            current_agent,
            pinned,
            recent,
            default_agent,
        } = situation;
        let sticky = current_agent.is_some() && (pinned || recent);
        // The agent the user is talking to right now, as they see it.
        let previous = current_agent.filter(|_| sticky);
        let previous_effective = previous.unwrap_or(default_agent).to_owned();
        let mention = split_mention(text).filter(|(id, _)| self.agents.iter().any(|a| a.id == *id));
        let (decision, text, pin) = if let Some((agent, rest)) = mention {
            let decision = self.fixed(rest, agent, Reason::Mention, previous);
            (decision, rest, false)
        } else if let Some(current) = previous.filter(|_| pinned) {
            let decision = self.fixed(text, current.to_owned(), Reason::Pinned, previous);
            (decision, text, true)
        } else {
            let decision = self.route(RouteInput {
                text,
                current_agent: previous,
                sticky,
                default_agent,
            });
            (decision, text, false)
        };
        Routing {
            decision,
            text,
            pin,
            previous: previous_effective,
        }
    }

    /// Like [`Router::decide`] for a message whose client asked for `agent` apart from the
    /// text ([`hearth_channel::Inbound::agent`]): that agent answers, as if addressed with
    /// `@agent`, unless the text itself starts with another agent's `@id` (typed by the user,
    /// which wins). An agent not in the set is ignored and the message routed as usual.
    pub fn decide_addressed<'t>(
        &self,
        text: &'t str,
        agent: Option<&str>,
        situation: Situation<'_>,
    ) -> Routing<'t> {
        let known = agent.filter(|id| self.agents.iter().any(|a| a.id == *id));
        let mentioned =
            split_mention(text).is_some_and(|(id, _)| self.agents.iter().any(|a| a.id == id));
        let Some(agent) = known.filter(|_| !mentioned) else {
            return self.decide(text, situation);
        };
        let sticky = situation.current_agent.is_some() && (situation.pinned || situation.recent);
        let previous = situation.current_agent.filter(|_| sticky);
        Routing {
            decision: self.fixed(text, agent.to_owned(), Reason::Mention, previous),
            text,
            pin: false,
            previous: previous.unwrap_or(situation.default_agent).to_owned(),
        }
    }

    /// A decision not made by keywords; the scores are still shown by `hearth route`.
    fn fixed(&self, text: &str, agent: String, reason: Reason, current: Option<&str>) -> Decision {
        Decision {
            changed: current != Some(agent.as_str()),
            agent,
            reason,
            scores: self.scores(text),
        }
    }

    /// Decides which agent answers: the most distinct keyword hits; a tie goes to the current
    /// agent if it is among the tied, then to file order; without hits, the current agent if
    /// sticky, else the default agent.
    ///
    /// An unknown current agent (removed from the file since) is ignored. An unknown default
    /// agent (a config `hearth check` would reject) falls back to the first agent.
    pub fn route(&self, input: RouteInput<'_>) -> Decision {
        let scores = self.scores(input.text);
        let known = |id: &str| self.agents.iter().any(|a| a.id == id);
        let current = input.current_agent.filter(|id| known(id));
        let top = scores.iter().map(|s| s.hits.len()).max().unwrap_or(0);

        let (agent, reason) = if top > 0 {
            let tied = |s: &&AgentScore| s.hits.len() == top;
            let winner = scores
                .iter()
                .filter(tied)
                .find(|s| Some(s.agent.as_str()) == current)
                .or_else(|| scores.iter().find(tied))
                .expect("some agent has the top score");
            let hits = winner.hits.clone();
            (winner.agent.clone(), Reason::Keywords { hits })
        } else if let Some(current) = current.filter(|_| input.sticky) {
            (current.to_owned(), Reason::Sticky)
        } else if known(input.default_agent) {
            (input.default_agent.to_owned(), Reason::Default)
        } else {
            let first = self.agents.first().map_or(input.default_agent, |a| &a.id);
            (first.to_owned(), Reason::Default)
        };

        Decision {
            changed: input.current_agent != Some(agent.as_str()),
            agent,
            reason,
            scores,
        }
    }
}

impl CompiledKeyword {
    /// Whether the keyword occurs in `text` (already normalised) on word boundaries.
    /// Allocation-free: it runs for every keyword of every message.
    fn matches(&self, text: &str) -> bool {
        let Some((first, rest)) = self.words.split_first() else {
            return false;
        };
        let mut from = 0;
        while let Some(found) = text[from..].find(first.as_str()) {
            let start = from + found;
            if is_boundary(text[..start].chars().next_back())
                && let Some(end) = match_rest(text, start + first.len(), rest)
                && is_boundary(text[end..].chars().next())
            {
                return true;
            }
            // Step one character, not one match: candidates may overlap.
            from = start + text[start..].chars().next().map_or(1, char::len_utf8);
        }
        false
    }
}

/// Matches the remaining words of a phrase at `pos`, each after at least one whitespace
/// character; returns the end of the match.
fn match_rest(text: &str, mut pos: usize, words: &[String]) -> Option<usize> {
    for word in words {
        let after = &text[pos..];
        let next = after.trim_start();
        if next.len() == after.len() || !next.starts_with(word.as_str()) {
            return None;
        }
        pos = text.len() - next.len() + word.len();
    }
    Some(pos)
}

/// A keyword may begin or end next to this character (None: start or end of text).
fn is_boundary(c: Option<char>) -> bool {
    c.is_none_or(|c| !c.is_alphanumeric())
}

/// The form in which texts and keywords are compared: lowercase, straight apostrophes.
fn normalize(text: &str) -> String {
    const APOSTROPHES: [char; 2] = ['\u{2019}', '\u{02BC}'];
    let lower = text.to_lowercase();
    if lower.contains(APOSTROPHES) {
        lower.replace(APOSTROPHES, "'")
    } else {
        lower
    }
}

/// "💰 Finance": shown before a reply when the agent changes.
pub fn switched_note(agent: &AgentDef) -> String {
    if agent.emoji.is_empty() {
        agent.name.clone()
    } else {
        format!("{} {}", agent.emoji, agent.name)
    }
}

/// What `hearth route "<text>"` prints: the choice and its reason, then every agent's score.
pub fn explain(decision: &Decision, agents: &AgentSet) -> String {
    let label = match agents.get(&decision.agent) {
        Some(agent) => format!("{} ({})", switched_note(agent), agent.id),
        None => decision.agent.clone(),
    };
    let reason = match &decision.reason {
        Reason::Keywords { hits } => {
            let tied: Vec<&str> = decision
                .scores
                .iter()
                .filter(|s| s.hits.len() == hits.len() && s.agent != decision.agent)
                .map(|s| s.agent.as_str())
                .collect();
            let mut reason = format!(
                "{} keyword{}: {}",
                hits.len(),
                if hits.len() == 1 { "" } else { "s" },
                hits.join(", ")
            );
            if !tied.is_empty() {
                let rule = if decision.changed {
                    "first in file order"
                } else {
                    "the current agent"
                };
                reason.push_str(&format!(" (tied with {}; {rule} wins)", tied.join(", ")));
            }
            reason
        }
        Reason::Mention => format!("addressed with @{}", decision.agent),
        Reason::Pinned => "pinned with /agent; keywords do not move it (/agent auto)".to_owned(),
        Reason::Sticky => "no keyword matched; the conversation keeps its agent".to_owned(),
        Reason::Default => "no keyword matched; the default agent".to_owned(),
    };

    let width = decision
        .scores
        .iter()
        .map(|s| s.agent.chars().count())
        .chain(["agent".len()])
        .max()
        .unwrap_or(0);
    let mut out = format!("→ {label}: {reason}\n\n");
    out.push_str(&format!("  {:<width$}  hits  keywords\n", "agent"));
    for score in &decision.scores {
        let mark = if score.agent == decision.agent {
            '*'
        } else {
            ' '
        };
        let line = format!(
            "{mark} {:<width$}  {:>4}  {}",
            score.agent,
            score.hits.len(),
            score.hits.join(", ")
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `/help`: the commands and the agents, short enough for a phone screen.
pub fn help_text(agents: &AgentSet) -> String {
    let mut out = String::from(
        "Commands:\n\
         /agents – list the agents\n\
         /agent – show the current agent\n\
         /agent ID – switch to an agent (or start a message with @ID)\n\
         /new – start a new conversation\n\
         /reset – clear this conversation and go back to the default agent\n\
         /cancel – stop the answer in progress\n\
         /tasks – background tasks, running and recent\n\
         /cancel N – stop background task N\n\
         /whoami – who you are to me: linked identities, permission, autonomy\n\
         /usage – tokens and cost, today and this month\n\
         /compact [focus] – summarise older turns of this conversation now\n\
         /budget [USD] – today's spending and cap (the owner sets it)\n\
         /plan – the current plan of a request that takes several steps\n\
         /help – this help\n\nAgents: ",
    );
    let list: Vec<String> = agents
        .iter()
        .map(|a| {
            if a.emoji.is_empty() {
                a.id.clone()
            } else {
                format!("{} {}", a.emoji, a.id)
            }
        })
        .collect();
    out.push_str(&list.join(", "));
    out.push_str(
        "\nEach message goes to the agent whose keywords it mentions; \
         otherwise the conversation keeps its agent.",
    );
    out
}

/// `/agents`: every agent with its description, the current one marked.
pub fn agents_text(agents: &AgentSet, current: Option<&str>) -> String {
    let mut out = String::from("Agents:\n");
    for agent in agents {
        out.push_str(&switched_note(agent));
        out.push_str(&format!(" (@{})", agent.id));
        if !agent.description.is_empty() {
            out.push_str(&format!(" – {}", agent.description));
        }
        if current == Some(agent.id.as_str()) {
            out.push_str(" ← current");
        }
        out.push('\n');
    }
    out.push_str("Switch with /agent ID, or start a message with @ID.");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An agent set with these (id, keywords), in order.
    fn set(agents: &[(&str, &[&str])]) -> AgentSet {
        let mut text = String::new();
        for (id, keywords) in agents {
            let keywords: Vec<String> = keywords.iter().map(|k| format!("{k:?}")).collect();
            text.push_str(&format!(
                "[[agent]]\nid = \"{id}\"\nname = \"{id}\"\nsystem_prompt = \"x\"\n\
                 [agent.triggers]\nkeywords = [{}]\n\n",
                keywords.join(", ")
            ));
        }
        AgentSet::parse(&text, "test").expect("test agents are valid")
    }

    fn input(text: &str) -> RouteInput<'_> {
        RouteInput {
            text,
            current_agent: None,
            sticky: false,
            default_agent: "general",
        }
    }

    /// Whether `keyword` (of a one-agent set) matches `text`.
    fn hits(keyword: &str, text: &str) -> bool {
        let agents = set(&[("a", &[keyword])]);
        !Router::new(&agents).scores(text)[0].hits.is_empty()
    }

    fn shipped() -> (AgentSet, Router) {
        let agents = AgentSet::shipped().expect("shipped agents are valid");
        let router = Router::new(&agents);
        (agents, router)
    }

    #[test]
    fn keywords_match_whole_words_only() {
        assert!(hits("paid", "paid"));
        assert!(hits("paid", "I paid 20 euros."));
        assert!(hits("paid", "(paid)"));
        assert!(hits("paid", "already paid!"));
        assert!(hits("paid", "paid-up"));
        assert!(!hits("paid", "the invoice is unpaid"));
        assert!(!hits("paid", "prepaid card"));
        assert!(!hits("paid", "paid2"));
        assert!(!hits("spent", "a misspent youth"));
        assert!(!hits("spent", "spentacular"));
        assert!(!hits("note", "notebook"));
        // Non-ASCII letters are word characters too.
        assert!(!hits("paid", "äpaid"));
        assert!(!hits("paid", "paidé"));
        // A later occurrence counts when the first is inside a word.
        assert!(hits("paid", "unpaid, now paid"));
        assert!(hits("to-do", "my to-do list"));
    }

    #[test]
    fn matching_ignores_case_across_unicode() {
        assert!(hits("ärger", "So ein ÄRGER mit dem Vermieter"));
        assert!(hits("Ärger", "ärger"));
        assert!(hits("Quittung", "hier die QUITTUNG"));
        // Capital sharp s lowercases to ß; no folding of ß to "ss" (it is not a case rule).
        assert!(hits("große", "eine GROẞE Rechnung"));
        assert!(!hits("straße", "strasse"));
        // std lowercasing is locale-independent: I -> i, İ -> i̇ (i + combining dot).
        assert!(hits("istanbul", "ISTANBUL trip"));
        assert!(hits("İstanbul", "İSTANBUL trip"));
        assert!(hits("İstanbul", "İstanbul trip"));
        assert!(!hits("kitap", "kıtap"));
        // İ grows from 2 to 3 bytes when lowercased; offsets stay consistent.
        assert!(hits("paid", "İİİ paid İİİ"));
        assert!(hits("Σ", "σ"));
        assert!(hits("μέλι", "ΜΈΛΙ"));
    }

    #[test]
    fn typographic_apostrophes_match_straight_ones() {
        assert!(hits("what's on", "What’s on today?"));
        assert!(hits("what’s on", "what's on today?"));
        assert!(hits("don't forget", "Don’t forget the milk"));
    }

    #[test]
    fn phrases_match_across_any_whitespace() {
        assert!(hits("write down", "please write down the code"));
        assert!(hits("write down", "please WRITE\n   down the code"));
        assert!(hits("write down", "write\t\r\ndown"));
        assert!(hits("write   down", "write down"));
        assert!(!hits("write down", "writedown"));
        assert!(!hits("write down", "write, down"));
        assert!(!hits("write down", "rewrite down"));
        assert!(!hits("write down", "write downtown"));
        assert!(!hits("write down", "write"));
        assert!(hits("look up", "look look up"));
    }

    #[test]
    fn distinct_hits_win_not_repetitions() {
        let agents = set(&[
            ("general", &[]),
            ("a", &["paid"]),
            ("b", &["spent", "euros"]),
        ]);
        let router = Router::new(&agents);
        let d = router.route(input("paid paid paid, spent 5 euros"));
        assert_eq!(d.agent, "b");
        assert_eq!(
            d.reason,
            Reason::Keywords {
                hits: vec!["spent".into(), "euros".into()]
            }
        );
        assert_eq!(d.scores[1].hits, ["paid"]);
        let all: Vec<&str> = d.scores.iter().map(|s| s.agent.as_str()).collect();
        assert_eq!(all, ["general", "a", "b"]);
    }

    #[test]
    fn ties_go_to_the_current_agent_then_file_order() {
        let agents = set(&[
            ("general", &[]),
            ("a", &["x"]),
            ("b", &["y"]),
            ("c", &["z", "w"]),
        ]);
        let router = Router::new(&agents);
        let route = |text, current| {
            router.route(RouteInput {
                current_agent: current,
                ..input(text)
            })
        };

        assert_eq!(route("x y", None).agent, "a");
        let d = route("x y", Some("b"));
        assert_eq!((d.agent.as_str(), d.changed), ("b", false));
        // The current agent is not among the tied: file order.
        let d = route("x y", Some("general"));
        assert_eq!((d.agent.as_str(), d.changed), ("a", true));
        // More hits beat the current agent.
        assert_eq!(route("y z w", Some("b")).agent, "c");
    }

    #[test]
    fn without_hits_sticky_keeps_the_agent_otherwise_default() {
        let agents = set(&[("general", &[]), ("finance", &["paid"])]);
        let router = Router::new(&agents);
        let route = |current, sticky, default_agent| {
            router.route(RouteInput {
                text: "and what about yesterday?",
                current_agent: current,
                sticky,
                default_agent,
            })
        };

        let d = route(Some("finance"), true, "general");
        assert_eq!(
            (d.agent.as_str(), &d.reason, d.changed),
            ("finance", &Reason::Sticky, false)
        );
        let d = route(Some("finance"), false, "general");
        assert_eq!(
            (d.agent.as_str(), &d.reason, d.changed),
            ("general", &Reason::Default, true)
        );
        let d = route(None, true, "general");
        assert_eq!(
            (d.agent.as_str(), &d.reason, d.changed),
            ("general", &Reason::Default, true)
        );
        // An agent removed from the file is not kept.
        let d = route(Some("gone"), true, "general");
        assert_eq!((d.agent.as_str(), &d.reason), ("general", &Reason::Default));
        // The default agent itself, still current: nothing changes.
        assert!(!route(Some("general"), false, "general").changed);
        // An unknown default agent falls back to the first agent.
        assert_eq!(route(None, false, "nobody").agent, "general");
        // A keyword hit beats stickiness.
        let d = router.route(RouteInput {
            text: "I paid",
            current_agent: Some("general"),
            sticky: true,
            default_agent: "general",
        });
        assert_eq!((d.agent.as_str(), d.changed), ("finance", true));
    }

    #[test]
    fn decide_takes_mention_then_pin_then_keywords() {
        let agents = set(&[
            ("general", &[]),
            ("finance", &["paid"]),
            ("tasks", &["todo"]),
        ]);
        let router = Router::new(&agents);
        let situation = |current, pinned, recent| Situation {
            current_agent: current,
            pinned,
            recent,
            default_agent: "general",
        };

        let r = router.decide("@Finance: add a todo", situation(Some("tasks"), true, true));
        assert_eq!(
            (r.decision.agent.as_str(), &r.decision.reason, r.text, r.pin),
            ("finance", &Reason::Mention, "add a todo", false)
        );
        assert_eq!(r.decision.scores[2].hits, ["todo"]);
        // An unknown @name is ordinary text.
        let r = router.decide("@bob I paid", situation(None, false, false));
        assert_eq!(
            (r.decision.agent.as_str(), r.text),
            ("finance", "@bob I paid")
        );

        // Pinned: keywords do not move it, however long the conversation was idle.
        let r = router.decide("I paid", situation(Some("tasks"), true, false));
        assert_eq!(
            (
                r.decision.agent.as_str(),
                &r.decision.reason,
                r.pin,
                r.switched()
            ),
            ("tasks", &Reason::Pinned, true, false)
        );

        // Idle and unpinned: back to the default agent, and the reply says so.
        let r = router.decide("hello", situation(Some("tasks"), false, false));
        assert_eq!(
            (
                r.decision.agent.as_str(),
                &r.decision.reason,
                r.previous.as_str()
            ),
            ("general", &Reason::Default, "general")
        );
        assert!(!r.switched(), "the user sees the default agent as current");
        let r = router.decide("hello", situation(Some("tasks"), false, true));
        assert_eq!(
            (r.decision.agent.as_str(), &r.decision.reason),
            ("tasks", &Reason::Sticky)
        );
        let r = router.decide("I paid", situation(Some("tasks"), false, true));
        assert!(r.switched());
        assert!(explain(&r.decision, &agents).starts_with("→ finance (finance): 1 keyword: paid"));
    }

    #[test]
    fn an_agent_asked_for_apart_from_the_text_answers_and_the_text_stays_as_typed() {
        let agents = set(&[
            ("general", &[]),
            ("finance", &["paid"]),
            ("tasks", &["todo"]),
        ]);
        let router = Router::new(&agents);
        let situation = |current, pinned| Situation {
            current_agent: current,
            pinned,
            recent: true,
            default_agent: "general",
        };
        // The client's agent beats keywords and a pin, and the text is not touched.
        let r = router.decide_addressed(
            "I paid a todo",
            Some("tasks"),
            situation(Some("finance"), true),
        );
        assert_eq!(
            (r.decision.agent.as_str(), &r.decision.reason, r.text, r.pin),
            ("tasks", &Reason::Mention, "I paid a todo", false)
        );
        assert_eq!(r.previous, "finance");
        // A known `@id` typed by the user wins over the client's agent.
        let r = router.decide_addressed("@finance I paid", Some("tasks"), situation(None, false));
        assert_eq!((r.decision.agent.as_str(), r.text), ("finance", "I paid"));
        // An agent not in the set (removed since the client listed it) is ignored.
        let r = router.decide_addressed("I paid", Some("gone"), situation(None, false));
        assert_eq!((r.decision.agent.as_str(), r.text), ("finance", "I paid"));
        let r = router.decide_addressed("hello", None, situation(None, false));
        assert_eq!(r.decision.reason, Reason::Default);
    }

    #[test]
    fn sticky_window_is_inclusive() {
        assert!(within_sticky(0, 30 * 60_000, 30));
        assert!(!within_sticky(0, 30 * 60_000 + 1, 30));
        assert!(within_sticky(0, i64::MAX, u64::MAX));
    }

    #[test]
    fn shipped_agents_route_realistic_messages() {
        let (_, router) = shipped();
        let cases = [
            ("I spent 12 euros on lunch", "finance"),
            ("Paid the electricity bill, 80 euros", "finance"),
            ("here's the receipt from the pharmacy", "finance"),
            ("how much did I spend on groceries this month?", "finance"),
            ("remind me to call mum tomorrow", "tasks"),
            ("add a task: renew the car insurance by Friday", "tasks"),
            ("what's on my todo list?", "tasks"),
            ("help me plan my week", "tasks"),
            ("put the dentist appointment in my calendar", "tasks"),
            ("what's on my agenda today", "briefing"),
            ("What’s on today?", "briefing"),
            ("give me a summary of my day", "briefing"),
            ("what's on my calendar tomorrow?", "briefing"),
            ("remember that my passport expires in May", "notes"),
            ("please write down the wifi password for guests", "notes"),
            ("search my notes for the boiler model", "notes"),
            ("do you recall the name of that restaurant?", "notes"),
            (
                "research the best e-bikes and compare three of them",
                "research",
            ),
            (
                "can you look up the opening hours of the museum",
                "research",
            ),
            ("Kindle versus Kobo, pros and cons?", "research"),
            ("hi, how are you?", "general"),
            ("translate 'good morning' into Italian", "general"),
        ];
        let mut wrong = Vec::new();
        for (text, want) in cases {
            let d = router.route(input(text));
            if d.agent != want {
                wrong.push(format!(
                    "{text:?} -> {} (want {want}): {:?}",
                    d.agent, d.scores
                ));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn shipped_agents_do_not_share_keywords() {
        let (agents, _) = shipped();
        let mut seen: Vec<(String, &str)> = Vec::new();
        for agent in &agents {
            for k in &agent.triggers.keywords {
                let norm = normalize(k);
                if let Some((_, other)) = seen.iter().find(|(n, _)| *n == norm) {
                    panic!("{k:?} is a keyword of both {other} and {}", agent.id);
                }
                seen.push((norm, &agent.id));
            }
        }
    }

    #[test]
    fn commands_parse() {
        let (agents, _) = shipped();
        let cmd = |text: &str| match parse_command(text, &agents) {
            Some(Parsed::Command(c)) => Some(c),
            _ => None,
        };
        assert_eq!(cmd("/help"), Some(Command::Help));
        assert_eq!(cmd("/start"), Some(Command::Help));
        assert_eq!(cmd("  /Help  "), Some(Command::Help));
        assert_eq!(cmd("/help@HearthBot"), Some(Command::Help));
        assert_eq!(cmd("/agents"), Some(Command::Agents));
        assert_eq!(cmd("/usage"), Some(Command::Usage));
        assert_eq!(cmd("/plan"), Some(Command::Plan));
        assert_eq!(cmd("/compact"), Some(Command::Compact(None)));
        assert_eq!(
            cmd("/compact  the trip to Rome "),
            Some(Command::Compact(Some("the trip to Rome".into())))
        );
        assert_eq!(cmd("/budget"), Some(Command::Budget(None)));
        assert_eq!(
            cmd("/budget@HearthBot 5"),
            Some(Command::Budget(Some("5".into())))
        );
        assert_eq!(cmd("/agent"), Some(Command::Agent(None)));
        assert_eq!(cmd("/agent@HearthBot"), Some(Command::Agent(None)));
        assert_eq!(
            cmd("/agent finance"),
            Some(Command::Agent(Some("finance".into())))
        );
        assert_eq!(
            cmd("/agent@HearthBot  Finance"),
            Some(Command::Agent(Some("finance".into())))
        );
        assert_eq!(
            cmd("/agent @finance"),
            Some(Command::Agent(Some("finance".into())))
        );
        assert_eq!(
            cmd("/agent\nnobody"),
            Some(Command::Agent(Some("nobody".into())))
        );
        assert_eq!(cmd("/reset"), Some(Command::Reset));
        assert_eq!(cmd("/new please"), Some(Command::New));
        assert_eq!(cmd("/whoami"), Some(Command::Whoami));
        assert_eq!(cmd("/cancel@HearthBot"), Some(Command::Cancel));
        assert_eq!(cmd("/cancel 3"), Some(Command::CancelTask(3)));
        assert_eq!(cmd("/cancel #12"), Some(Command::CancelTask(12)));
        assert_eq!(cmd("/cancel now"), Some(Command::Cancel));
        assert_eq!(cmd("/tasks"), Some(Command::Tasks));
        assert!(is_cancel("/cancel") && !is_cancel("/cancel 3"));
        assert_eq!(cmd("/foo bar"), Some(Command::Unknown("foo".into())));
        assert_eq!(cmd("/Foo@HearthBot"), Some(Command::Unknown("foo".into())));
        // Not commands: ordinary text for the router.
        assert_eq!(parse_command("/", &agents), None);
        assert_eq!(parse_command("/ help", &agents), None);
        assert_eq!(parse_command("/etc/hosts is broken", &agents), None);
        assert_eq!(parse_command("please /help", &agents), None);
        assert_eq!(parse_command("I paid", &agents), None);
        assert_eq!(parse_command("", &agents), None);
    }

    #[test]
    fn every_listed_command_is_understood() {
        for command in COMMANDS {
            let parsed = parse_slash(&format!("/{}", command.name));
            assert!(
                parsed.is_some_and(|c| !matches!(c, Command::Unknown(_))),
                "/{} is listed but not understood",
                command.name
            );
        }
    }

    #[test]
    fn cancel_is_recognised_like_every_command() {
        assert!(is_cancel("/cancel"));
        assert!(is_cancel(" /CANCEL@hearth_bot "));
        assert!(is_cancel("/cancel now please"));
        assert!(!is_cancel("/cancelled"));
        assert!(!is_cancel("please cancel"));
        assert!(!is_cancel("/ cancel"));
        assert!(!is_cancel("@finance /cancel"));
    }

    #[test]
    fn mentions_of_known_agents_parse() {
        let (agents, _) = shipped();
        let mention = |agent: &str, text: &str| {
            Some(Parsed::Mention {
                agent: agent.into(),
                text: text.into(),
            })
        };
        assert_eq!(
            parse_command("@finance how much did I spend?", &agents),
            mention("finance", "how much did I spend?")
        );
        assert_eq!(
            parse_command("@Finance: lunch 12€", &agents),
            mention("finance", "lunch 12€")
        );
        assert_eq!(
            parse_command("@tasks,\nbuy milk ", &agents),
            mention("tasks", "buy milk")
        );
        assert_eq!(parse_command("@notes", &agents), mention("notes", ""));
        assert_eq!(parse_command("@unknown I paid 5 euros", &agents), None);
        assert_eq!(parse_command("@ finance hi", &agents), None);
        assert_eq!(parse_command("mail me@finance.example", &agents), None);
    }

    #[test]
    fn unknown_mention_is_routed_as_text() {
        let (agents, router) = shipped();
        let text = "@bob I paid the rent";
        assert_eq!(parse_command(text, &agents), None);
        assert_eq!(router.route(input(text)).agent, "finance");
    }

    #[test]
    fn explain_shows_choice_reason_and_every_score() {
        let (agents, router) = shipped();
        let d = router.route(input("I spent 12 euros on lunch"));
        let text = explain(&d, &agents);
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("→ 💰 Finance (finance): 2 keywords: spent, euros")
        );
        assert!(
            text.contains("\n* finance      2  spent, euros\n"),
            "{text}"
        );
        assert!(text.contains("\n  general      0\n"), "{text}");
        assert_eq!(text.lines().count(), 3 + agents.len(), "{text}");

        let d = router.route(input("hello"));
        assert!(
            explain(&d, &agents)
                .starts_with("→ 🏠 General (general): no keyword matched; the default agent")
        );

        let d = router.route(RouteInput {
            current_agent: Some("research"),
            ..input("search my notes")
        });
        assert!(explain(&d, &agents).contains("(tied with notes; the current agent wins)"));
        let d = router.route(input("search my notes"));
        assert!(explain(&d, &agents).contains("(tied with research; first in file order wins)"));
    }

    #[test]
    fn chat_texts() {
        let (agents, _) = shipped();
        let finance = agents.get("finance").expect("shipped");
        assert_eq!(switched_note(finance), "💰 Finance");

        let help = help_text(&agents);
        for needle in [
            "/help",
            "/agents",
            "/agent ID",
            "@ID",
            "/reset",
            "/new",
            "/whoami",
            "/cancel",
            "/usage",
            "/compact",
            "/budget",
            "/plan",
        ] {
            assert!(help.contains(needle), "{needle} missing from {help}");
        }
        assert!(help.contains("💰 finance"), "{help}");

        let list = agents_text(&agents, Some("finance"));
        assert!(
            list.contains(
                "💰 Finance (@finance) – Tracks expenses, receipts and budgets ← current\n"
            ),
            "{list}"
        );
        assert_eq!(list.matches("← current").count(), 1);
        assert!(!agents_text(&agents, None).contains("current"));
    }

    /// Throughput of `route` on the shipped agents; run with `--ignored --nocapture` in
    /// release mode. Prints numbers, asserts nothing (timing is a benchmark's job).
    #[test]
    #[ignore]
    fn route_throughput() {
        let (_, router) = shipped();
        let texts = [
            "I spent 12 euros on lunch at the new place near the office",
            "remind me to call mum tomorrow after work, and don't forget the flowers",
            "Hi! Could you tell me a bit about the history of the city I am visiting next week?",
        ];
        let n = 100_000;
        let start = std::time::Instant::now();
        let mut picked = 0;
        for i in 0..n {
            picked += router.route(input(texts[i % texts.len()])).scores.len();
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{n} routes in {secs:.3}s: {:.0} msgs/s ({picked})",
            n as f64 / secs
        );
    }
}
