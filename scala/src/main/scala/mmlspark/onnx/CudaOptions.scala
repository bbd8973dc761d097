package mmlspark.onnx

/** The CUDA provider's options a session sets besides the device: one table for the JVM's sessions
  * ([[SessionSettings]]) and the Python engine's (codegen writes it into
  * `mmlspark/_engine/_CudaOptions.py`).
  */
object CudaOptions {

  /** An option whose value is a session setting: `setting` names the stage param (and the
    * [[SessionSettings]] field) it comes from; an option marked `whenPositive` is set only for a
    * value over 0 (0 meaning none).
    */
  final case class FromSetting(option: String, setting: String, whenPositive: Boolean)

  val fromSettings: Seq[FromSetting] = Seq(
    FromSetting("cudnn_conv_algo_search", "cudnnConvAlgoSearch", whenPositive = false),
    FromSetting("gpu_mem_limit", "cudaMemoryLimit", whenPositive = true)
  )

  /** Options of a fixed value: the arena grows by what a run asks for, not to the next power of two
    * (which has grown it by tens of GiB for batches of varying size).
    */
  val fixed: Seq[(String, String)] = Seq("arena_extend_strategy" -> "kSameAsRequested")

  /** The options for the settings' `values`, by setting name. */
  def of(values: Map[String, Any]): Seq[(String, String)] =
    fromSettings.flatMap { f =>
      val value = values(f.setting).toString
      if (f.whenPositive && value.toLong <= 0) None else Some(f.option -> value)
    } ++ fixed
}
