//! PNG and GIF encoding of [`Frame`]s (the `png` and `gif` crates, no image stack).

use std::path::Path;

use roll_flow_engine::atomic_file::write_atomic;

use crate::error::EnvError;
use crate::render::frame::Frame;

fn render_err(e: impl std::fmt::Display) -> EnvError {
    EnvError::Render(e.to_string())
}

/// One frame as PNG bytes (8-bit RGB).
pub fn png_bytes(frame: &Frame) -> Result<Vec<u8>, EnvError> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, frame.width, frame.height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(render_err)?;
    writer.write_image_data(&frame.rgb).map_err(render_err)?;
    writer.finish().map_err(render_err)?;
    Ok(out)
}

/// An episode's frames as one looping GIF; `delay_cs` is the time per frame in 1/100 s.
/// All frames must have the first frame's size and at most 256 distinct colours in total
/// (env frames use a small fixed palette).
pub fn gif_bytes(frames: &[Frame], delay_cs: u16) -> Result<Vec<u8>, EnvError> {
    let first = frames.first().ok_or_else(|| render_err("no frames"))?;
    let (width, height) = (dim16(first.width)?, dim16(first.height)?);
    let palette = palette_of(frames)?;
    let flat: Vec<u8> = palette.iter().flatten().copied().collect();
    let mut out = Vec::new();
    {
        let mut encoder = gif::Encoder::new(&mut out, width, height, &flat).map_err(render_err)?;
        encoder
            .set_repeat(gif::Repeat::Infinite)
            .map_err(render_err)?;
        for frame in frames {
            if (frame.width, frame.height) != (first.width, first.height) {
                return Err(render_err("frames of different sizes"));
            }
            let indices = frame
                .rgb
                .chunks_exact(3)
                .map(|px| palette.iter().position(|c| c == px).unwrap_or(0) as u8)
                .collect::<Vec<u8>>();
            let mut gif_frame = gif::Frame::from_indexed_pixels(width, height, indices, None);
            gif_frame.delay = delay_cs;
            encoder.write_frame(&gif_frame).map_err(render_err)?;
        }
    }
    Ok(out)
}

fn dim16(d: u32) -> Result<u16, EnvError> {
    u16::try_from(d).map_err(|_| render_err(format!("frame dimension {d} exceeds a GIF's 65535")))
}

/// The distinct colours of all frames, in order of first use.
fn palette_of(frames: &[Frame]) -> Result<Vec<[u8; 3]>, EnvError> {
    let mut palette: Vec<[u8; 3]> = Vec::new();
    for px in frames.iter().flat_map(|f| f.rgb.chunks_exact(3)) {
        let colour = [px[0], px[1], px[2]];
        if !palette.contains(&colour) {
            if palette.len() == 256 {
                return Err(render_err("more than 256 colours"));
            }
            palette.push(colour);
        }
    }
    Ok(palette)
}

/// Writes one frame as a PNG file (atomically).
pub fn write_png(frame: &Frame, path: &Path) -> Result<(), EnvError> {
    write_file(path, &png_bytes(frame)?)
}

/// Writes an episode's frames as a GIF file (atomically).
pub fn write_gif(frames: &[Frame], delay_cs: u16, path: &Path) -> Result<(), EnvError> {
    write_file(path, &gif_bytes(frames, delay_cs)?)
}

/// Writes `bytes` to `path` atomically, so an interrupted eval leaves no torn image.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), EnvError> {
    write_atomic(path, bytes).map_err(|e| render_err(format!("{}: {e}", path.display())))
}

#[cfg(test)]
#[path = "encode_tests.rs"]
mod tests;
