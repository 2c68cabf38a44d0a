import type { Settings } from "./ipc/types";

/** The paper's defaults, the same as `Settings::default()` in selfrag-core. */
export function defaultSettings(): Settings {
  return {
    mode: "adaptive",
    threshold: 0.2,
    k: 5,
    weights: { rel: 1.0, sup: 1.0, use: 0.5 },
    use_p_lm: true,
    hard_constraints: false,
    long_form: false,
    beam_width: 2,
    max_segments: 7,
    max_new_tokens: 100,
    max_segment_tokens: 200,
  };
}
