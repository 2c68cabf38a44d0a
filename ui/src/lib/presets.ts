// Named starting points for the critique weights, one click instead of three sliders.

import type { CritiqueWeights } from "./ipc/types";
import { defaultSettings } from "./settings";

/** A named set of weights and the hard-constraints switch. */
export interface WeightPreset {
  id: "strict" | "balanced" | "fluent";
  label: string;
  /** What choosing it does, for the button's title. */
  hint: string;
  weights: CritiqueWeights;
  hardConstraints: boolean;
}

const paper = defaultSettings();

export const WEIGHT_PRESETS: readonly WeightPreset[] = [
  {
    id: "strict",
    label: "Strict grounding",
    hint: "Support counts double and unsupported or irrelevant candidates are dropped",
    weights: { rel: 1.0, sup: 2.0, use: 0.5 },
    hardConstraints: true,
  },
  {
    id: "balanced",
    label: "Balanced",
    hint: "The paper's defaults",
    weights: { ...paper.weights },
    hardConstraints: paper.hard_constraints,
  },
  {
    id: "fluent",
    label: "Fluent",
    hint: "Usefulness counts more than relevance and support",
    weights: { rel: 0.5, sup: 0.5, use: 1.0 },
    hardConstraints: false,
  },
];

/** Whether the current knobs are exactly those of `preset`. */
export function presetMatches(
  preset: WeightPreset,
  weights: CritiqueWeights,
  hardConstraints: boolean,
): boolean {
  return (
    preset.hardConstraints === hardConstraints &&
    preset.weights.rel === weights.rel &&
    preset.weights.sup === weights.sup &&
    preset.weights.use === weights.use
  );
}
