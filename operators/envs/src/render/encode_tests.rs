//! Round trips: what is encoded decodes to the same pixels.

use super::{gif_bytes, png_bytes};
use crate::render::frame::{Frame, Shape, Tile, TILE_PX};

fn sample(marker_colour: [u8; 3]) -> Frame {
    Frame::from_tiles(2, 3, |r, c| {
        if (r, c) == (1, 2) {
            Tile::marked([10, 20, 30], Shape::Disc, marker_colour)
        } else {
            Tile::plain([200, 200, 200])
        }
    })
    .unwrap()
}

#[test]
fn frame_has_tile_geometry_and_marker() {
    let frame = sample([255, 0, 0]);
    assert_eq!((frame.width, frame.height), (3 * TILE_PX, 2 * TILE_PX));
    let centre = (2 * TILE_PX + TILE_PX / 2, TILE_PX + TILE_PX / 2);
    assert_eq!(frame.pixel(centre.0, centre.1), [255, 0, 0]);
    assert_eq!(frame.pixel(2 * TILE_PX, TILE_PX), [10, 20, 30]);
    assert_eq!(frame.pixel(0, 0), [200, 200, 200]);
}

#[test]
fn png_round_trip() {
    let frame = sample([255, 0, 0]);
    let bytes = png_bytes(&frame).unwrap();
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (frame.width, frame.height));
    assert_eq!(&buf[..info.buffer_size()], &frame.rgb[..]);
}

#[test]
fn gif_round_trip_keeps_every_frame() {
    let frames = [sample([255, 0, 0]), sample([0, 255, 0])];
    let bytes = gif_bytes(&frames, 50).unwrap();
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::RGBA);
    let mut decoder = options.read_info(std::io::Cursor::new(bytes)).unwrap();
    for expected in &frames {
        let frame = decoder.read_next_frame().unwrap().unwrap();
        assert_eq!(frame.delay, 50);
        let rgb: Vec<u8> = frame
            .buffer
            .chunks_exact(4)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect();
        assert_eq!(rgb, expected.rgb);
    }
    assert!(decoder.read_next_frame().unwrap().is_none());
}

#[test]
fn gif_refuses_empty_and_mismatched_episodes() {
    assert!(gif_bytes(&[], 10).is_err());
    let small = Frame::from_tiles(1, 1, |_, _| Tile::plain([0, 0, 0])).unwrap();
    assert!(gif_bytes(&[sample([1, 2, 3]), small], 10).is_err());
}

#[test]
fn a_grid_too_large_for_a_frame_is_an_error_not_a_wrapped_size() {
    // 4096 tiles of 16 px are 65536 px: one more than a GIF side holds.
    let plain = |_: usize, _: usize| Tile::plain([0, 0, 0]);
    let err = Frame::from_tiles(1, 4096, plain).unwrap_err().to_string();
    assert_eq!(
        err,
        "render: a 1×4096 grid of 16-pixel tiles does not fit in a frame of at most 65535 pixels a side"
    );
    // 2^28 tiles are 2^32 px, which wrapped to a 0-pixel side in u32 arithmetic.
    assert!(Frame::from_tiles(1 << 28, 1, plain).is_err());
    assert!(Frame::from_tiles(usize::MAX, usize::MAX, plain).is_err());
    let widest = Frame::from_tiles(1, 4095, plain).unwrap();
    assert_eq!((widest.width, widest.height), (4095 * TILE_PX, TILE_PX));
    assert_eq!(widest.rgb.len(), 4095 * 16 * 16 * 3);
}

#[test]
fn files_are_written_whole_with_no_temporary_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let (png, gif) = (dir.path().join("f.png"), dir.path().join("e.gif"));
    let frames = [sample([1, 2, 3]), sample([4, 5, 6])];
    super::write_png(&frames[0], &png).unwrap();
    super::write_gif(&frames, 10, &gif).unwrap();
    assert_eq!(std::fs::read(&png).unwrap(), png_bytes(&frames[0]).unwrap());
    assert_eq!(
        std::fs::read(&gif).unwrap(),
        gif_bytes(&frames, 10).unwrap()
    );
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["e.gif", "f.png"]);
}
