//! The order a worker hands its jobs to its compute thread: step by step, and within a
//! step the nodes in the graph's topological order.
//!
//! Timely schedules a worker's operators in an order of its own, which can differ between
//! workers; an operator's collective calls ([`crate::collective`]) are matched across
//! workers by their rank among the worker's calls, so every worker must make them in the
//! same order. A node's job for step t therefore goes out only at its turn: when every
//! node before it in (step, topological position) has gone out, or has given up its turn
//! (nothing to run). The compute thread runs jobs in the order they come, so the calls
//! follow. Dependencies only point forward in that order (upstream nodes come first, and
//! the feedback edge carries step t's versions to step t + 1), so waiting for a turn never
//! waits for something that waits in turn.

use timely::scheduling::Activator;

/// Whose turn it is, and how to wake each node's operator when its turn comes.
pub(crate) struct Turns {
    step: u64,
    position: usize,
    /// By position in the topological order.
    activators: Vec<Option<Activator>>,
}

impl Turns {
    /// Turns over `nodes` nodes, starting at `first_step`'s first node.
    pub(crate) fn new(first_step: u64, nodes: usize) -> Turns {
        Turns {
            step: first_step,
            position: 0,
            activators: (0..nodes).map(|_| None).collect(),
        }
    }

    /// Registers the operator of the node at `position`, woken when its turn comes.
    pub(crate) fn register(&mut self, position: usize, activator: Activator) {
        self.activators[position] = Some(activator);
    }

    pub(crate) fn is_turn(&self, step: u64, position: usize) -> bool {
        (self.step, self.position) == (step, position)
    }

    /// The node at the current turn has gone out (or given up): the next one's turn.
    pub(crate) fn advance(&mut self) {
        self.position += 1;
        if self.position == self.activators.len() {
            (self.step, self.position) = (self.step + 1, 0);
        }
        if let Some(activator) = &self.activators[self.position] {
            activator.activate();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Turns;

    #[test]
    fn turns_go_node_by_node_then_step_by_step() {
        let mut turns = Turns::new(5, 2);
        assert!(turns.is_turn(5, 0) && !turns.is_turn(5, 1) && !turns.is_turn(6, 0));
        turns.advance();
        assert!(turns.is_turn(5, 1));
        turns.advance();
        assert!(turns.is_turn(6, 0));
    }
}
