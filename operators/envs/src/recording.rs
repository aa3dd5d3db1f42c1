//! One episode's renders for eval: a frame and the text per state, written as numbered
//! PNG frames, one GIF and one text transcript.

use std::path::{Path, PathBuf};

use crate::env::Env;
use crate::error::EnvError;
use crate::render::encode::{write_file, write_gif, write_png};
use crate::render::frame::Frame;

/// GIF time per frame, 1/100 s.
const FRAME_DELAY_CS: u16 = 50;

/// The states of one episode, in order.
#[derive(Default)]
pub struct EpisodeRecording {
    frames: Vec<Frame>,
    texts: Vec<String>,
}

impl EpisodeRecording {
    /// Records the env's current state.
    pub fn capture(&mut self, env: &dyn Env) -> Result<(), EnvError> {
        self.frames.push(env.render_frame()?);
        self.texts.push(env.observation());
        Ok(())
    }

    /// Recorded states.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Writes `dir/stem_000.png…`, `dir/stem.gif` and `dir/stem.txt`; returns the GIF path.
    /// Envs that draw no pixels (0×0 frames) get only the transcript.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<PathBuf, EnvError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| EnvError::Render(format!("{}: {e}", dir.display())))?;
        let transcript = self.texts.join("\n\n---\n\n");
        let text_path = dir.join(format!("{stem}.txt"));
        write_file(&text_path, transcript.as_bytes())?;
        let drawable = self.frames.iter().all(|f| f.width > 0 && f.height > 0);
        if !drawable || self.frames.is_empty() {
            return Ok(text_path);
        }
        for (i, frame) in self.frames.iter().enumerate() {
            write_png(frame, &dir.join(format!("{stem}_{i:03}.png")))?;
        }
        let gif_path = dir.join(format!("{stem}.gif"));
        write_gif(&self.frames, FRAME_DELAY_CS, &gif_path)?;
        Ok(gif_path)
    }
}
