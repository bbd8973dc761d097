package mmlspark.contracts

import scala.util.matching.Regex

/** A message a stage gives a row or a schema it cannot serve, as a template: `{name}` is a value as
  * Java prints it (a string as is), `{name:mp}` a number of pixels in megapixels ("12.3 MP") and
  * `{name:mb}` a number of bytes in MiB ("1.5 MB"), both rounded half up. The tables of them
  * (`RowMessage.tables`) are written once, in Scala, and codegen writes them for the Python engine
  * (`mmlspark/_engine/_RowMessages.py`), which fills them the same way.
  */
final case class RowMessage(key: String, template: String) {

  /** The message with `values` filled in; fails on a placeholder without a value. */
  def apply(values: (String, Any)*): String = RowMessage.render(template, values.toMap)
}

object RowMessage {
  private val placeholder = """\{(\w+)(?::(mp|mb))?\}""".r

  def megapixels(pixels: Long): String = f"${pixels / 1e6}%.1f MP"

  def megabytes(bytes: Long): String = f"${bytes / 1048576.0}%.1f MB"

  def render(template: String, values: Map[String, Any]): String =
    placeholder.replaceAllIn(
      template,
      m => {
        val value = values.getOrElse(
          m.group(1),
          throw new IllegalArgumentException(s"no value for {${m.group(1)}} in '$template'")
        )
        val shown = m.group(2) match {
          case "mp" => megapixels(value.asInstanceOf[Number].longValue)
          case "mb" => megabytes(value.asInstanceOf[Number].longValue)
          case _ => value.toString
        }
        Regex.quoteReplacement(shown)
      }
    )
}

/** The messages of the schema checks every stage makes before any job (after its name and uid). */
object SchemaMessages {
  val NoColumn: RowMessage = RowMessage(
    "noColumn",
    "input column '{column}' does not exist; available columns: [{available}]"
  )
  val ColumnType: RowMessage =
    RowMessage("columnType", "input column '{column}' must be {expected} but was {actual}")
  val ColumnExists: RowMessage =
    RowMessage("columnExists", "output column '{column}' already exists")
  val NotDistinct: RowMessage =
    RowMessage("notDistinct", "{what} must be distinct but repeat {repeated}")
  val NotTransformer: RowMessage = RowMessage(
    "notTransformer",
    "param '{param}' must hold a Transformer (a fitted model) but holds {held}; fit it first"
  )

  val all: Seq[RowMessage] = Seq(NoColumn, ColumnType, ColumnExists, NotDistinct, NotTransformer)
}
