//! Rendering for eval: every env draws its state as an RGB [`Frame`] of coloured tiles;
//! [`encode`] turns frames into PNG files and an episode's frames into one GIF.
//!
//! Text rendering is each env's own `observation()` (the grid with docs/REFERENCE.md's
//! symbols); this module only does pixels. Frames use a small fixed palette, so the GIF
//! encoder needs no colour quantisation and is lossless.

pub mod encode;
pub mod frame;

pub use encode::{gif_bytes, png_bytes, write_gif, write_png};
pub use frame::{Frame, Rgb, Shape, Tile, MAX_SIDE_PX, TILE_PX};
