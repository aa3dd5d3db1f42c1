//! An RGB image built from a grid of tiles: a background colour plus an optional marker.

use crate::error::EnvError;

/// An sRGB colour.
pub type Rgb = [u8; 3];

/// Side of one grid tile in pixels.
pub const TILE_PX: u32 = 16;

/// Longest side of a frame in pixels: the most a GIF (the episode renders) can hold.
pub const MAX_SIDE_PX: u32 = u16::MAX as u32;

/// A marker drawn on top of a tile's background.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A filled circle (player, agent).
    Disc,
    /// A filled square inset from the tile edge (box).
    Square,
    /// A hollow square outline (target).
    Ring,
    /// Two diagonals (failure: player in a hole).
    Cross,
}

/// One grid cell as drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile {
    pub background: Rgb,
    pub marker: Option<(Shape, Rgb)>,
}

impl Tile {
    /// A plain tile.
    pub fn plain(background: Rgb) -> Self {
        Tile {
            background,
            marker: None,
        }
    }

    /// A tile with a marker.
    pub fn marked(background: Rgb, shape: Shape, colour: Rgb) -> Self {
        Tile {
            background,
            marker: Some((shape, colour)),
        }
    }
}

/// An RGB image, row-major, 3 bytes per pixel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub width: u32,
    pub height: u32,
    pub rgb: Vec<u8>,
}

impl Frame {
    /// A 0×0 image (an env before its first reset).
    pub fn empty() -> Frame {
        Frame {
            width: 0,
            height: 0,
            rgb: Vec::new(),
        }
    }

    /// Draws a `rows × cols` grid, asking `tile(row, col)` for each cell. A grid wider or
    /// taller than [`MAX_SIDE_PX`] pixels is an error (sizes are computed without
    /// wrapping).
    pub fn from_tiles(
        rows: usize,
        cols: usize,
        tile: impl Fn(usize, usize) -> Tile,
    ) -> Result<Frame, EnvError> {
        let side = |tiles: usize| {
            tiles
                .checked_mul(TILE_PX as usize)
                .and_then(|px| u32::try_from(px).ok())
                .filter(|&px| px <= MAX_SIDE_PX)
        };
        let too_large = || {
            EnvError::Render(format!(
                "a {rows}×{cols} grid of {TILE_PX}-pixel tiles does not fit in a frame of at \
                 most {MAX_SIDE_PX} pixels a side"
            ))
        };
        let (Some(width), Some(height)) = (side(cols), side(rows)) else {
            return Err(too_large());
        };
        let bytes = (width as usize)
            .checked_mul(height as usize)
            .and_then(|px| px.checked_mul(3))
            .ok_or_else(too_large)?;
        let mut frame = Frame {
            width,
            height,
            rgb: vec![0; bytes],
        };
        for r in 0..rows {
            for c in 0..cols {
                frame.draw_tile(r as u32, c as u32, tile(r, c));
            }
        }
        Ok(frame)
    }

    /// The colour of pixel (x, y).
    pub fn pixel(&self, x: u32, y: u32) -> Rgb {
        let i = self.byte_index(x, y);
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// Where pixel (x, y) starts in `rgb`.
    fn byte_index(&self, x: u32, y: u32) -> usize {
        (y as usize * self.width as usize + x as usize) * 3
    }

    fn put(&mut self, x: u32, y: u32, colour: Rgb) {
        let i = self.byte_index(x, y);
        self.rgb[i..i + 3].copy_from_slice(&colour);
    }

    fn draw_tile(&mut self, row: u32, col: u32, tile: Tile) {
        let (x0, y0) = (col * TILE_PX, row * TILE_PX);
        for dy in 0..TILE_PX {
            for dx in 0..TILE_PX {
                let colour = match tile.marker {
                    Some((shape, colour)) if covers(shape, dx, dy) => colour,
                    _ => tile.background,
                };
                self.put(x0 + dx, y0 + dy, colour);
            }
        }
    }
}

/// Whether `shape` covers pixel (dx, dy) of a tile.
fn covers(shape: Shape, dx: u32, dy: u32) -> bool {
    let n = TILE_PX as i32;
    let (x, y) = (dx as i32, dy as i32);
    match shape {
        Shape::Disc => {
            let (cx, cy) = (2 * x + 1 - n, 2 * y + 1 - n);
            cx * cx + cy * cy <= (n - 5) * (n - 5)
        }
        Shape::Square => (3..n - 3).contains(&x) && (3..n - 3).contains(&y),
        Shape::Ring => {
            let inside = (2..n - 2).contains(&x) && (2..n - 2).contains(&y);
            let core = (4..n - 4).contains(&x) && (4..n - 4).contains(&y);
            inside && !core
        }
        Shape::Cross => {
            let inside = (2..n - 2).contains(&x) && (2..n - 2).contains(&y);
            inside && ((x - y).abs() <= 1 || (x + y - (n - 1)).abs() <= 1)
        }
    }
}
