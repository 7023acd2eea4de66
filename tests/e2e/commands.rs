//! Chat commands, strangers and pairing.

use hearth_testkit::Reply;

use crate::support::{CHAT, Hearth, WAIT};

#[tokio::test]
async fn help_whoami_new_and_reset() {
    let mut h = Hearth::new().await;
    h.start().await;
    let help = h.say("/help").await;
    assert!(help.text.contains("/agent"), "{}", help.text);
    let agents = h.say("/agents").await;
    assert!(
        agents.text.contains("Finance") && agents.text.contains("Tasks"),
        "{}",
        agents.text
    );
    let whoami = h.say("/whoami@hearth_bot").await;
    assert!(whoami.text.contains("memory:1001"), "{}", whoami.text);
    let unknown = h.say("/frobnicate").await;
    assert!(unknown.text.contains("/help"), "{}", unknown.text);

    h.llm.push(Reply::text("first"));
    h.say("remember the number 97531").await;
    h.say("/new").await;
    h.llm.push(Reply::text("second"));
    h.say("what was the number?").await;
    let messages = h.llm.requests()[1]["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        !messages
            .iter()
            .any(|m| m["content"].as_str().is_some_and(|c| c.contains("97531"))),
        "after /new the earlier messages are not sent: {messages:?}"
    );
    let nothing = h.say("/cancel").await;
    assert_eq!(nothing.text, "Nothing is running.");
    h.stop().await;
}

#[tokio::test]
async fn a_stranger_gets_one_pairing_code_and_nothing_else() {
    let mut h = Hearth::new().await;
    h.start().await;
    h.channel.push_text("stranger-chat", "666", "hello?");
    let sent = h.channel.wait_for_sent(1, WAIT).await;
    assert!(sent[0].text.contains("pairing code"), "{}", sent[0].text);
    let code: String = sent[0]
        .text
        .split_once("code is ")
        .map(|(_, rest)| rest.chars().take(8).collect())
        .expect("code in the text");

    // More messages: silence, and the model is never asked.
    h.channel.push_text("stranger-chat", "666", "hello???");
    h.channel.push_text(CHAT, crate::support::USER, "/whoami");
    let sent = h.channel.wait_for_sent(2, WAIT).await;
    assert_eq!(sent.len(), 2);
    assert_eq!(
        sent[1].chat.chat_id, CHAT,
        "only the allowed user got a second reply"
    );
    assert_eq!(h.llm.request_count(), 0);

    // The owner approves the code; the stranger's next message is answered.
    let store = h.daemon().store().clone();
    let request = store.pairing(&code).await.expect("db").expect("stored");
    assert_eq!(request.platform_user_id, "666");
    store
        .allow_identity("memory", "666", None, "paired", false, 0)
        .await
        .expect("approve");
    h.channel.push_text("stranger-chat", "666", "now?");
    let sent = h.channel.wait_for_sent(3, WAIT).await;
    assert_eq!(sent[2].text, "ok");
    h.stop().await;
}
