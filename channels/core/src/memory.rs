//! An in-memory channel for tests (filled in by the channel-core work).
