//! Device choice: `auto` takes CUDA, then Metal, when this build has the feature and the
//! hardware answers, and falls back to the CPU with a logged reason. Asking for `cuda` or
//! `metal` explicitly also falls back to the CPU, with a warning, so the app always starts.

use candle_core::Device;

use crate::error::ModelError;

/// The device for `pref` (`auto`, `cpu`, `cuda`, `metal`; case-insensitive).
pub fn pick_device(pref: &str) -> Result<Device, ModelError> {
    match pref.trim().to_ascii_lowercase().as_str() {
        "cpu" => Ok(Device::Cpu),
        "auto" => {
            let gpu =
                try_cuda().or_else(|cuda| try_metal().map_err(|metal| format!("{cuda}; {metal}")));
            Ok(gpu.unwrap_or_else(|reason| {
                tracing::info!(%reason, "no GPU available, using the CPU");
                Device::Cpu
            }))
        }
        "cuda" => Ok(try_cuda().unwrap_or_else(|reason| {
            tracing::warn!(%reason, "CUDA requested but unavailable, falling back to the CPU");
            Device::Cpu
        })),
        "metal" => Ok(try_metal().unwrap_or_else(|reason| {
            tracing::warn!(%reason, "Metal requested but unavailable, falling back to the CPU");
            Device::Cpu
        })),
        other => Err(ModelError::Device {
            requested: other.to_owned(),
            reason: "unknown device; expected auto, cpu, cuda or metal".to_owned(),
        }),
    }
}

fn try_cuda() -> Result<Device, String> {
    if !candle_core::utils::cuda_is_available() {
        return Err("this build has no `cuda` feature".to_owned());
    }
    Device::new_cuda(0).map_err(|e| e.to_string())
}

fn try_metal() -> Result<Device, String> {
    if !candle_core::utils::metal_is_available() {
        return Err("this build has no `metal` feature".to_owned());
    }
    Device::new_metal(0).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_and_auto_always_give_a_device() {
        assert!(matches!(pick_device("cpu"), Ok(Device::Cpu)));
        assert!(pick_device("AUTO").is_ok());
        assert!(pick_device("cuda").is_ok());
    }

    #[test]
    fn unknown_preference_is_an_error_naming_it() {
        let err = pick_device("tpu")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("tpu"), "{err}");
    }
}
