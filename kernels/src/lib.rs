//! roll-flow kernels.
