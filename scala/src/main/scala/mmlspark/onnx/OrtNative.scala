package mmlspark.onnx

import java.io.File
import java.nio.file.Path

import scala.util.control.NonFatal

import org.apache.spark.ml.mmlspark.SparkInternals.Logging

/** What ONNX Runtime Java leaves in the temporary folder, and its removal.
  *
  * ONNX Runtime Java (1.29) copies its native libraries out of its jar into a new
  * `onnxruntime-java<random>` folder of `java.io.tmpdir` when the first of its classes loads, and
  * asks for that folder to be deleted only when the JVM exits: a JVM that is killed (as Spark's
  * executors and drivers often are) leaves the folder and the libraries, and even a clean exit
  * leaves the empty folder (the folder's delete runs before its files'). Once the libraries are
  * loaded, the copies are no longer needed (the loaded code stays mapped): [[removeExtracted]]
  * removes the folder then, unless the jar carries an execution provider's library (a GPU build),
  * which ONNX Runtime copies into the same folder when a session first asks for that provider.
  */
private[onnx] object OrtNative extends Logging {

  /** Execution providers whose library ONNX Runtime Java copies out of its jar on first use. */
  private val LazyProviders = Seq("cuda", "rocm", "dnnl", "openvino", "tensorrt", "qnn")

  private def loader: Class[_] = Class.forName("ai.onnxruntime.OnnxRuntime")

  private def static(name: String): AnyRef = {
    val field = loader.getDeclaredField(name)
    field.setAccessible(true)
    field.get(null)
  }

  /** The folder this JVM's ONNX Runtime copied its libraries to (None before it loaded them). */
  def extractedPath: Option[Path] =
    try Option(static("tempDirectory")).collect { case p: Path => p }
    catch { case NonFatal(_) => None }

  /** [[extractedPath]] while the folder is there. */
  def extractedFolder: Option[Path] = extractedPath.filter(_.toFile.isDirectory)

  /** Whether the ONNX Runtime jar carries a provider library it would copy out later. */
  def carriesLazyProviders: Boolean = {
    val platform =
      try String.valueOf(static("OS_ARCH_STR"))
      catch { case NonFatal(_) => return true }
    LazyProviders.exists { p =>
      val name = System.mapLibraryName(s"onnxruntime_providers_$p")
      loader.getResource(s"/ai/onnxruntime/native/$platform/$name") != null
    }
  }

  /** Removes the folder of copied libraries once ONNX Runtime has loaded them (call after the first
    * `OrtEnvironment`); where it cannot or must not, leaves it as ONNX Runtime does.
    */
  def removeExtracted(): Unit = extractedFolder.foreach { folder =>
    if (!carriesLazyProviders) {
      try {
        val dir = folder.toFile
        Option(dir.listFiles()).getOrElse(Array.empty[File]).foreach(_.delete())
        if (!dir.delete()) logDebug(s"could not remove ONNX Runtime's folder $dir")
      } catch { case NonFatal(e) => logDebug(s"could not remove ONNX Runtime's folder $folder", e) }
    }
  }
}
