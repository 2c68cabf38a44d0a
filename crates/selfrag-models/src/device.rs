//! A [`DeviceChoice`] (defined in selfrag-core) made a candle device: `auto` takes CUDA, then
//! Metal, when this build has the feature and the hardware answers, and falls back to the CPU
//! with a logged reason. Asking for `cuda` or `metal` explicitly also falls back to the CPU,
//! with a warning, so the app always starts.

use candle_core::Device;
use selfrag_core::{DeviceChoice, DeviceKind};

/// The device for `choice`.
pub fn pick_device(choice: DeviceChoice) -> Device {
    match choice {
        DeviceChoice::Cpu => Device::Cpu,
        DeviceChoice::Auto => {
            let gpu =
                try_cuda().or_else(|cuda| try_metal().map_err(|metal| format!("{cuda}; {metal}")));
            gpu.unwrap_or_else(|reason| {
                tracing::info!(%reason, "no GPU available, using the CPU");
                Device::Cpu
            })
        }
        DeviceChoice::Cuda => try_cuda().unwrap_or_else(|reason| {
            tracing::warn!(%reason, "CUDA requested but unavailable, falling back to the CPU");
            Device::Cpu
        }),
        DeviceChoice::Metal => try_metal().unwrap_or_else(|reason| {
            tracing::warn!(%reason, "Metal requested but unavailable, falling back to the CPU");
            Device::Cpu
        }),
    }
}

/// The choices this build offers: `auto` and `cpu` always, `cuda` and `metal` only when
/// compiled in (the `cuda` / `metal` features). Whether a GPU is present is known only when one
/// is opened.
pub fn compiled_devices() -> Vec<DeviceChoice> {
    let mut out = vec![DeviceChoice::Auto, DeviceChoice::Cpu];
    if candle_core::utils::cuda_is_available() {
        out.push(DeviceChoice::Cuda);
    }
    if candle_core::utils::metal_is_available() {
        out.push(DeviceChoice::Metal);
    }
    out
}

/// The kind of an opened device.
pub fn device_kind(device: &Device) -> DeviceKind {
    match device {
        Device::Cpu => DeviceKind::Cpu,
        Device::Cuda(_) => DeviceKind::Cuda,
        Device::Metal(_) => DeviceKind::Metal,
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
    fn every_choice_gives_a_device_and_the_cpu_is_the_cpu() {
        assert!(matches!(pick_device(DeviceChoice::Cpu), Device::Cpu));
        for choice in DeviceChoice::ALL {
            let kind = device_kind(&pick_device(choice));
            // Without the GPU features every choice falls back to the CPU.
            if !cfg!(any(feature = "cuda", feature = "metal")) {
                assert_eq!(kind, DeviceKind::Cpu, "{choice}");
            }
        }
    }

    #[test]
    fn the_cpu_is_always_compiled_in_and_named() {
        let devices = compiled_devices();
        assert_eq!(devices[..2], [DeviceChoice::Auto, DeviceChoice::Cpu]);
        assert_eq!(
            devices.contains(&DeviceChoice::Cuda),
            cfg!(feature = "cuda")
        );
        assert_eq!(device_kind(&Device::Cpu), DeviceKind::Cpu);
    }
}
