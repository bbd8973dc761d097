package mmlspark.onnx

import java.nio.{ByteBuffer, ByteOrder}
import java.util.concurrent.atomic.AtomicLong

import ai.onnxruntime.{OnnxTensor, OnnxValue, OrtEnvironment, OrtSession}
import mmlspark.onnx.ElementType._

/** Output tensors that ONNX Runtime writes into (pinned outputs): for each fetched output with a
  * batch dimension, a fixed row shape and a type read as is (float, double, int, long), a direct,
  * native-order buffer reused run after run. A run then allocates no output memory, and each row's
  * values are copied once, out of the buffer (an unpinned output is copied out of ONNX Runtime
  * whole, then per row). An output is pinned only after a run has shown its declared shape, so a
  * model whose outputs differ from their declaration runs as before. Not thread-safe: one per
  * [[BatchRunner]].
  */
private[onnx] final class OutputBuffers(fetches: Seq[(String, TensorSpec, ElementType)]) {

  private val buffers = new Array[ByteBuffer](fetches.length)
  private val confirmed = new Array[Boolean](fetches.length)
  private val views = new Array[java.nio.Buffer](fetches.length)

  private def pinnable(i: Int): Boolean = {
    val (_, spec, element) = fetches(i)
    confirmed(i) && spec.mapOf.isEmpty && spec.batchDim.isDefined &&
    spec.rowShape.forall(_ >= 0) && Seq(Float32, Float64, Int32, Int64).contains(element)
  }

  /** Tensors over the buffers for a run of `rows` rows, by output name: the caller closes them (the
    * buffers stay).
    */
  def pin(env: OrtEnvironment, rows: Int): java.util.Map[String, OnnxValue] = {
    val pinned = new java.util.HashMap[String, OnnxValue]()
    fetches.indices.filter(pinnable).foreach { i =>
      val (_, spec, element) = fetches(i)
      val shape = (rows.toLong +: spec.rowShape).toArray
      val bytes = BigInt(shape.product) * element.bytes
      if (bytes <= TensorBatch.MaxBuffer) {
        if (buffers(i) == null || buffers(i).capacity() < bytes) {
          free(i)
          buffers(i) = ByteBuffer.allocateDirect(bytes.toInt).order(ByteOrder.nativeOrder())
        }
        val view = buffers(i).duplicate().order(ByteOrder.nativeOrder())
        view.position(0).limit(bytes.toInt)
        views(i) = element match {
          case Float32 => view.asFloatBuffer()
          case Float64 => view.asDoubleBuffer()
          case Int32 => view.asIntBuffer()
          case _ => view.asLongBuffer()
        }
        val tensor = views(i) match {
          case b: java.nio.FloatBuffer => OnnxTensor.createTensor(env, b, shape)
          case b: java.nio.DoubleBuffer => OnnxTensor.createTensor(env, b, shape)
          case b: java.nio.IntBuffer => OnnxTensor.createTensor(env, b, shape)
          case b: java.nio.LongBuffer => OnnxTensor.createTensor(env, b, shape)
        }
        pinned.put(spec.name, tensor)
      }
    }
    if (!pinned.isEmpty) OutputBuffers.pinnedRuns.incrementAndGet()
    pinned
  }

  /** The buffer output `name` was written into, in the last run that pinned it. */
  def written(name: String): Option[java.nio.Buffer] =
    fetches.indices.find(i => fetches(i)._2.name == name).flatMap(i => Option(views(i)))

  /** Notes the outputs of an unpinned run of `rows` rows whose shape is the declared one. */
  def confirm(result: OrtSession.Result, rows: Int): Unit = fetches.indices.foreach { i =>
    val (_, spec, _) = fetches(i)
    if (!confirmed(i)) result.get(spec.name).ifPresent {
      case t: OnnxTensor => confirmed(i) = t.getInfo.getShape.toSeq == rows.toLong +: spec.rowShape
      case _ =>
    }
  }

  private def free(i: Int): Unit = {
    val buffer = buffers(i)
    buffers(i) = null
    views(i) = null
    if (buffer != null) TensorBatch.free(buffer)
  }

  /** Frees every buffer now. */
  def release(): Unit = fetches.indices.foreach(free)
}

private[onnx] object OutputBuffers {

  /** Runs made with pinned outputs in this JVM (for tests). */
  val pinnedRuns = new AtomicLong()
}
