package mmlspark.core

import java.io.File
import java.lang.reflect.Modifier
import java.net.URL
import java.util.zip.ZipFile

import scala.jdk.CollectionConverters._

import org.apache.spark.ml.PipelineStage
import org.apache.spark.ml.evaluation.Evaluator

/** Finds classes by scanning the jar or class directory they were loaded from. Build-time only: the
  * code generator finds every public stage this way (no hand-kept list) and writes the
  * `META-INF/services` files from it, which [[Stages]] reads at run time; tests use it to find
  * their suites.
  */
object ClassScan {

  /** Every public, concrete stage or evaluator under package `mmlspark` in this library's jar or
    * class directory, sorted by name.
    */
  def publicStages: Seq[Class[_]] =
    classesIn(getClass.getProtectionDomain.getCodeSource.getLocation, "mmlspark.")
      .filter(isPublicStage)

  def isPublicStage(cls: Class[_]): Boolean =
    (classOf[PipelineStage].isAssignableFrom(cls) || classOf[Evaluator].isAssignableFrom(cls)) &&
      Modifier.isPublic(cls.getModifiers) &&
      !Modifier.isAbstract(cls.getModifiers) &&
      !cls.isInterface &&
      !cls.getName.contains("$") &&
      cls.getConstructors.exists(_.getParameterCount == 0)

  /** The classes under `prefix` in the jar or directory at `location`, sorted by name. */
  def classesIn(location: URL, prefix: String): Seq[Class[_]] = {
    val root = new File(location.toURI)
    val names =
      if (root.isDirectory) {
        val base = root.toPath
        java.nio.file.Files
          .walk(base)
          .iterator()
          .asScala
          .map(p => base.relativize(p).toString.replace(File.separatorChar, '/'))
          .toList
      } else {
        val zip = new ZipFile(root)
        try zip.entries().asScala.map(_.getName).toList
        finally zip.close()
      }
    names
      .filter(_.endsWith(".class"))
      .map(_.stripSuffix(".class").replace('/', '.'))
      .filter(n => n.startsWith(prefix) && !n.contains("$"))
      .sorted
      .map(n => Class.forName(n, false, getClass.getClassLoader))
  }
}
