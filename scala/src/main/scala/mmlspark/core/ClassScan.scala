package mmlspark.contracts

import java.io.File
import java.lang.reflect.Modifier
import java.net.URL
import java.util.zip.ZipFile

import scala.jdk.CollectionConverters._

import org.apache.spark.ml.PipelineStage
import org.apache.spark.ml.evaluation.Evaluator

/** Finds classes by scanning the jar or class directory they were loaded from, so that every public
  * stage is known without a hand-kept list (used by the code generator, the Spark Connect registry
  * and the tests that check every stage is covered).
  */
object Stages {

  /** Every public, concrete stage or evaluator under package `mmlspark`, sorted by name. */
  lazy val all: Seq[Class[_]] =
    classesIn(classOf[StageWritable].getProtectionDomain.getCodeSource.getLocation, "mmlspark.")
      .filter(isPublicStage)

  /** The class names of [[all]], as an array for callers outside Scala (Python tests). */
  def names: Array[String] = all.map(_.getName).toArray

  def isPublicStage(cls: Class[_]): Boolean =
    (classOf[PipelineStage].isAssignableFrom(cls) || classOf[Evaluator].isAssignableFrom(cls)) &&
      Modifier.isPublic(cls.getModifiers) &&
      !Modifier.isAbstract(cls.getModifiers) &&
      !cls.isInterface &&
      !cls.getName.contains("$") &&
      cls.getConstructors.exists(_.getParameterCount == 0)

  /** The area of a stage: `mmlspark.stages.SelectColumns` is in area `stages`. */
  def area(cls: Class[_]): String = cls.getPackage.getName.stripPrefix("mmlspark.")

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
