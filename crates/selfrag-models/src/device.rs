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

/// The device names this build can use: `auto` and `cpu` always, `cuda` and `metal` only when
/// compiled in (the `cuda` / `metal` features). Whether a GPU is present is known only when one
/// is opened.
pub fn compiled_devices() -> Vec<&'static str> {
    let mut out = vec!["auto", "cpu"];
    if candle_core::utils::cuda_is_available() {
        out.push("cuda");
    }
    if candle_core::utils::metal_is_available() {
        out.push("metal");
    }
    out
}

/// `cpu`, `cuda` or `metal`: the kind of an opened device.
pub fn device_kind(device: &Device) -> &'static str {
    match device {
        Device::Cpu => "cpu",
        Device::Cuda(_) => "cuda",
        Device::Metal(_) => "metal",
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
    fn the_cpu_is_always_compiled_in_and_named() {
        let devices = compiled_devices();
        assert_eq!(devices[..2], ["auto", "cpu"]);
        assert_eq!(devices.contains(&"cuda"), cfg!(feature = "cuda"));
        assert_eq!(device_kind(&Device::Cpu), "cpu");
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
