package mmlspark.codegen

// The Spark lines mmlspark is built and tested for, as data. Compiled into the sbt build (which
// cross-compiles one jar per entry of `jars`) and into the `codegen` project (which writes the
// same facts into mmlspark/_version.py, from which the Python package picks the jar that matches
// the running Spark and the line tests pick their pyspark). Like SharedParamsSpec.scala it must
// compile with the build's Scala 2.12 and the library's 2.13.

/** One jar: the Scala it is compiled with, the Spark it is compiled against (the jars of that
  * pyspark release), the json4s that Spark ships, its per-line source folder (under
  * scala/src/main), and the Spark lines (major.minor) it serves.
  */
final case class SparkJar(
    scalaVersion: String,
    compileSpark: String,
    json4s: String,
    sources: String,
    lines: Seq[String]
) {
  def scalaBinary: String = scalaVersion.split('.').take(2).mkString(".")
}

object SparkLines {

  /** The primary jar first: the full test suite runs on its newest line. One Scala 2.13 jar,
    * compiled against the newest Spark, serves every 4.x line (the line tests prove it); Spark 3.5
    * is built with Scala 2.12.
    */
  val jars: Seq[SparkJar] = Seq(
    SparkJar("2.13.18", "4.3.0", "4.0.7", "spark-4", Seq("4.0", "4.1", "4.2", "4.3")),
    SparkJar("2.12.21", "3.5.9", "3.7.0-M11", "spark-3.5", Seq("3.5"))
  )

  val primary: SparkJar = jars.head

  /** The pyspark release the line tests install for each line (the newest of each today). */
  val tested: Seq[(String, String)] =
    Seq("3.5" -> "3.5.9", "4.0" -> "4.0.5", "4.1" -> "4.1.4", "4.2" -> "4.2.1", "4.3" -> "4.3.0")

  /** The pyspark requirement of the wheel: every line some jar serves. */
  val pysparkRequirement: String = ">=3.5,<4.4"

  def jarFor(scalaBinary: String): SparkJar =
    jars.find(_.scalaBinary == scalaBinary).getOrElse {
      sys.error(s"no mmlspark jar is built with Scala $scalaBinary")
    }
}
